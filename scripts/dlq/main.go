// Command dlq lists, shows and replays the dead letters of the suite's
// consumers through their admin API (GET /admin/dlq, GET /admin/dlq/{id},
// POST /admin/dlq/{id}/replay), so an operator needs neither SQL nor kcat:
//
//	go run ./scripts/dlq list   [--service inventory] [--aggregate O-1] [--status DEAD]
//	go run ./scripts/dlq show   --service inventory --id 3
//	go run ./scripts/dlq replay --service inventory --id 3 [--by alice]
//
// ADMIN_TOKEN is sent as the bearer token when set. The services are
// looked up on make run's ports unless --url names one. It exits with
// status 1 when the suite refuses or fails a request and 2 on a usage error.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

func main() { cli.Main("dlq", "\n"+usage, run) }

// consumers are the services that dead-letter, with their make run URLs.
var consumers = []struct{ name, url string }{
	{"inventory", "http://127.0.0.1:8083"},
	{"points", "http://127.0.0.1:8084"},
	{"notification", "http://127.0.0.1:8085"},
	{"payment", "http://127.0.0.1:8082"},
}

const usage = `usage:
  go run ./scripts/dlq list   [--service NAME] [--aggregate ORDER_ID] [--status DEAD|REPLAYED] [--url URL]
  go run ./scripts/dlq show   --service NAME --id N [--url URL]
  go run ./scripts/dlq replay --service NAME --id N [--by WHO] [--url URL]

NAME is inventory, points, notification or payment (list: all of them when
omitted). ADMIN_TOKEN is sent as the bearer token when set.`

// command is a parsed command line.
type command struct {
	verb      string
	services  []string // names, in order
	urls      map[string]string
	aggregate string
	status    string
	id        int64
	by        string
	token     string
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd, err := parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	c := suiteapi.New(suiteapi.Config{URLs: cmd.urls, AdminToken: cmd.token, HTTPClient: &http.Client{Timeout: 30 * time.Second}})
	defer c.Close()
	switch cmd.verb {
	case "list":
		return list(ctx, c, cmd, stdout)
	case "show":
		return show(ctx, c, cmd, stdout)
	}
	return replay(ctx, c, cmd, stdout)
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (command, error) {
	env := envconfig.New(getenv)
	if len(args) == 0 {
		return command{}, cli.Usagef("name a command: list, show or replay")
	}
	cmd := command{verb: args[0], token: getenv("ADMIN_TOKEN"), urls: map[string]string{}}
	if cmd.verb == "-h" || cmd.verb == "--help" || cmd.verb == "help" {
		fmt.Fprintln(stderr, usage)
		return command{}, flag.ErrHelp
	}
	if !slices.Contains([]string{"list", "show", "replay"}, cmd.verb) {
		return command{}, cli.Usagef("unknown command %q: want list, show or replay", cmd.verb)
	}
	fs := flag.NewFlagSet("dlq "+cmd.verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	service := fs.String("service", "", "the consumer: inventory, points, notification or payment")
	base := fs.String("url", "", "the service's base URL (default: its make run port)")
	fs.StringVar(&cmd.aggregate, "aggregate", "", "list only the dead letters of this order id")
	fs.StringVar(&cmd.status, "status", "", "list only DEAD (waiting for a fix and a replay) or REPLAYED ones")
	id := fs.Int64("id", 0, "the dead letter's id (show, replay)")
	fs.StringVar(&cmd.by, "by", env.String("USER", "dlq-cli"), "who asks for the replay, for the audit (replay)")
	if err := cli.ParseFlags(fs, args[1:]); err != nil {
		return command{}, err
	}
	for _, c := range consumers {
		if *service == "" || *service == c.name {
			cmd.services = append(cmd.services, c.name)
			cmd.urls[c.name] = c.url
		}
	}
	switch {
	case len(cmd.services) == 0:
		return command{}, cli.Usagef("--service %q: want inventory, points, notification or payment", *service)
	case *service == "" && cmd.verb != "list":
		return command{}, cli.Usagef("%s needs --service", cmd.verb)
	case *base != "" && *service == "":
		return command{}, cli.Usagef("--url needs --service")
	case cmd.verb == "list" && *id != 0:
		return command{}, cli.Usagef("list takes no --id (use show)")
	case cmd.verb != "list" && *id <= 0:
		return command{}, cli.Usagef("%s needs --id N (the id column of list)", cmd.verb)
	case cmd.verb != "list" && (cmd.aggregate != "" || cmd.status != ""):
		return command{}, cli.Usagef("%s takes --id, not --aggregate or --status", cmd.verb)
	case cmd.status != "" && cmd.status != "DEAD" && cmd.status != "REPLAYED":
		return command{}, cli.Usagef("--status %q: want DEAD or REPLAYED", cmd.status)
	}
	if *base != "" {
		if u, err := url.Parse(*base); err != nil || u.Scheme == "" || u.Host == "" {
			return command{}, cli.Usagef("--url %q: want http://host:port", *base)
		}
		cmd.urls[*service] = strings.TrimRight(*base, "/")
	}
	cmd.id = *id
	return cmd, nil
}

func list(ctx context.Context, c *suiteapi.Client, cmd command, w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tID\tSTATUS\tCLASS\tATTEMPTS\tTYPE\tAGGREGATE\tEVENT ID\tFIRST FAILED\tREASON")
	total := 0
	var errs []error
	for _, name := range cmd.services {
		items, err := c.DeadLetters(ctx, name, cmd.aggregate, cmd.status)
		if err != nil {
			errs = append(errs, suiteapi.Explain(err))
			continue
		}
		total += len(items)
		for _, d := range items {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", name, d.ID, d.Status, d.ErrorClass, d.Attempts,
				cmp.Or(d.EventType, "-"), cmp.Or(d.AggregateID, "-"), cmp.Or(d.EventID, "-"), d.FirstFailedAt.UTC().Format(time.RFC3339), shorten(d.FailureReason, 60))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d dead letters", total)
	if cmd.status != "" {
		fmt.Fprintf(w, " %s", cmd.status)
	}
	if cmd.aggregate != "" {
		fmt.Fprintf(w, " of %s", cmd.aggregate)
	}
	fmt.Fprintln(w)
	return errors.Join(errs...)
}

func show(ctx context.Context, c *suiteapi.Client, cmd command, w io.Writer) error {
	d, _, err := c.Inspect(ctx, cmd.services[0], cmd.id)
	if err != nil {
		return suiteapi.Explain(err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rows := [][2]string{
		{"service", cmd.services[0]},
		{"id", strconv.FormatInt(d.ID, 10)},
		{"status", d.Status},
		{"consumer", d.Consumer},
		{"eventId", d.EventID},
		{"eventType", d.EventType},
		{"aggregateId", d.AggregateID},
		{"originalTopic", fmt.Sprintf("%s (partition %d, offset %d)", d.OriginalTopic, d.OriginalPartition, d.OriginalOffset)},
		{"errorClass", d.ErrorClass},
		{"attempts", strconv.Itoa(d.Attempts)},
		{"firstFailedAt", d.FirstFailedAt.UTC().Format(time.RFC3339Nano)},
		{"deadLetteredAt", d.DeadLetteredAt.UTC().Format(time.RFC3339Nano)},
		{"failureReason", d.FailureReason},
		{"key", string(d.Key)},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	for _, k := range slices.Sorted(maps.Keys(d.Headers)) {
		fmt.Fprintf(tw, "header %s\t%s\n", k, d.Headers[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "value:\n%s\n", formatValue(d.Value))
	return nil
}

// formatValue indents a JSON value; anything else (a poison message) is
// shown as it is.
func formatValue(v []byte) string {
	var js any
	if json.Unmarshal(v, &js) == nil {
		if out, err := json.MarshalIndent(js, "  ", "  "); err == nil {
			return "  " + string(out)
		}
	}
	return "  " + strconv.Quote(string(v))
}

func replay(ctx context.Context, c *suiteapi.Client, cmd command, w io.Writer) error {
	name := cmd.services[0]
	res, err := c.Replay(ctx, name, cmd.id, cmd.by)
	if err != nil {
		return suiteapi.Explain(err)
	}
	sent := fmt.Sprintf("%s sent back to %s with its original eventId", res.EventID, res.OriginalTopic)
	what, ok := map[string]string{
		"APPLIED":          sent + "; the consumer applied it",
		"IGNORED_STALE":    sent + "; the consumer ignored it as older than the order's state, nothing changed",
		"DUPLICATE":        sent + "; the consumer had processed it before, nothing changed",
		"PARKED":           sent + "; the consumer parked it until its predecessor arrives",
		"DEAD_LETTERED":    sent + "; it failed again and is a new dead letter (make dlq list)",
		"PENDING":          sent + "; the consumer had not decided yet (make dlq show)",
		"ALREADY_REPLAYED": "nothing sent again",
	}[res.Outcome]
	if !ok {
		return fmt.Errorf("dead letter %d of %s: replay outcome %q", res.ID, name, res.Outcome)
	}
	fmt.Fprintf(w, "dead letter %d of %s: %s: %s (audited as %s)\n", res.ID, name, res.Outcome, what, cmd.by)
	return nil
}

// shorten puts s on one line of at most n characters.
func shorten(s string, n int) string {
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}
