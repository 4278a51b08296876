# syntax=docker/dockerfile:1
#
# One Dockerfile for the six services; SERVICE picks which one, PORT is the
# port it listens on (its HTTP_ADDR default):
#
#   docker build --build-arg SERVICE=order --build-arg PORT=8081 -t fulfillment/order-service .
#
# docker-compose.yml builds all six this way, the console (SERVICE=console)
# and the Kafka fault proxy of the drills (SERVICE=faultproxy,
# PACKAGE=./scripts/faultproxy).

FROM golang:1.26 AS build
ARG SERVICE
ARG PACKAGE=./services/${SERVICE}
RUN test -n "$SERVICE" || { echo "build with --build-arg SERVICE=order|payment|inventory|points|notification|reconciliation" >&2; exit 1; }
WORKDIR /src
# The whole workspace: go.work names every module, and services build
# against pkg/ through it.
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/service ${PACKAGE}

# Alpine rather than distroless so compose health checks can use wget.
FROM alpine:3.22
ARG SERVICE
ARG PORT=8081
LABEL org.opencontainers.image.title="${SERVICE}-service"
COPY --from=build /out/service /usr/local/bin/service
USER 65532:65532
EXPOSE ${PORT}
ENTRYPOINT ["/usr/local/bin/service"]
