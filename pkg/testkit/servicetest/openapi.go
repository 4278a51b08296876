package servicetest

import (
	"bytes"
	"net/http"
	"os"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
)

// UpdateOpenAPIEnv names the variable that makes CheckOpenAPI write the
// served document to its file instead of comparing them:
// UPDATE_OPENAPI=1 go test -run OpenAPI ./services/order.
const UpdateOpenAPIEnv = "UPDATE_OPENAPI"

// CheckOpenAPI fails the test unless the service's GET /openapi.json is
// the document committed in file. The service started, so its routes and
// the operations it describes matched (service.Run checks them); the
// service runs with FAILPOINTS_ENABLED and PPROF_ENABLED, so the document
// has every route a configuration can serve.
func (s *Service) CheckOpenAPI(file string) {
	s.t.Helper()
	code, served := s.Do(http.MethodGet, apispec.Path, "")
	if code != http.StatusOK {
		s.t.Fatalf("GET %s = %d %s", apispec.Path, code, served)
	}
	if os.Getenv(UpdateOpenAPIEnv) != "" {
		if err := os.WriteFile(file, served, 0o644); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(file)
	if err != nil {
		s.t.Fatalf("%v (%s=1 writes it)", err, UpdateOpenAPIEnv)
	}
	if !bytes.Equal(committed, served) {
		s.t.Fatalf("%s differs from the document the service serves: run the test with %s=1 and commit the file", file, UpdateOpenAPIEnv)
	}
}
