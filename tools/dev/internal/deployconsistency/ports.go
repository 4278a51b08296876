package deployconsistency

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// PortsHeading opens the README section whose table lists every port of
// `make run` and of compose.
const PortsHeading = "## Ports"

// Ports are one row of the README's ports table: the port on this machine
// under `make run` and under compose, 0 where there is none ("—").
type Ports struct {
	Run, Compose int
}

// rowName is a row's first cell: a compose service, or a name of the
// runner's (`control-api`), in backquotes.
var rowName = regexp.MustCompile("^`([a-z][a-z0-9-]*)`$")

// firstPort is the first number of a cell: "9092 (embedded)" is 9092.
var firstPort = regexp.MustCompile(`^\D*?(\d{2,5})`)

// PortsTable reads the table under the README's PortsHeading (up to the
// next "## " heading): its first column names the row, its third and fourth
// are the ports under `make run` and compose; a cell starting with "—" is
// no port.
func PortsTable(markdown []byte) (map[string]Ports, error) {
	rows := map[string]Ports{}
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	inSection := false
	var errs []error
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "## ") {
			inSection = line == PortsHeading
			continue
		}
		if !inSection || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		m := rowName.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			continue // the header and its rule
		}
		if len(cells) < 4 {
			errs = append(errs, fmt.Errorf("README ports table: row %s: want name | what | make run | compose", m[1]))
			continue
		}
		run, err1 := cellPort(cells[2])
		compose, err2 := cellPort(cells[3])
		if err := errors.Join(err1, err2); err != nil {
			errs = append(errs, fmt.Errorf("README ports table: row %s: %w", m[1], err))
			continue
		}
		if _, dup := rows[m[1]]; dup {
			errs = append(errs, fmt.Errorf("README ports table: row %s twice", m[1]))
		}
		rows[m[1]] = Ports{Run: run, Compose: compose}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read ports table: %w", err)
	}
	if len(rows) == 0 {
		errs = append(errs, fmt.Errorf("README: no ports table under %q", PortsHeading))
	}
	return rows, errors.Join(errs...)
}

func cellPort(cell string) (int, error) {
	cell = strings.TrimSpace(cell)
	if strings.HasPrefix(cell, "—") {
		return 0, nil
	}
	m := firstPort.FindStringSubmatch(cell)
	if m == nil {
		return 0, fmt.Errorf("%q: want a port, or — for none", cell)
	}
	return strconv.Atoi(m[1])
}

// PublishedPorts are the host ports compose publishes, by service (the
// first of a service that publishes several).
func PublishedPorts(p *types.Project) map[string]int {
	out := map[string]int{}
	for _, name := range sortedKeys(p.Services) {
		for _, port := range p.Services[name].Ports {
			if n, err := strconv.Atoi(port.Published); err == nil {
				if _, ok := out[name]; !ok {
					out[name] = n
				}
			}
		}
	}
	return out
}

// CheckPorts compares the README's ports table with the ports the runner
// listens on (run) and compose publishes (compose), both by row name: every
// port of either must be in the table, in its column, and every port in
// the table must be one of theirs; a row neither knows says "—" twice.
func CheckPorts(table map[string]Ports, run, compose map[string]int) []error {
	var errs []error
	names := map[string]bool{}
	for name := range table {
		names[name] = true
	}
	for name := range run {
		names[name] = true
	}
	for name := range compose {
		names[name] = true
	}
	for _, name := range sortedKeys(names) {
		row, ok := table[name]
		if !ok {
			errs = append(errs, fmt.Errorf("README ports table: no row `%s` (make run: %s, compose: %s)", name, portText(run[name]), portText(compose[name])))
			continue
		}
		if row.Run != run[name] {
			errs = append(errs, fmt.Errorf("README ports table: `%s` under make run is %s, but the runner uses %s", name, portText(row.Run), portText(run[name])))
		}
		if row.Compose != compose[name] {
			errs = append(errs, fmt.Errorf("README ports table: `%s` under compose is %s, but docker-compose.yml publishes %s", name, portText(row.Compose), portText(compose[name])))
		}
	}
	return errs
}

func portText(p int) string {
	if p == 0 {
		return "none (—)"
	}
	return strconv.Itoa(p)
}
