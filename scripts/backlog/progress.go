package backlog

import (
	"fmt"
	"strings"
	"sync"
)

// progress writes the drill's phases and its live sampling line.
type progress struct {
	mu      sync.Mutex // the scale-out says its line from its own goroutine
	out     Output
	cfg     Config
	samples int
	pending bool // a live line is on screen without its newline
}

// say writes one line about a phase, after the live line if one is shown.
func (p *progress) say(format string, args ...any) {
	if p.out.Progress == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.out.Progress, format+"\n", args...)
}

// sample shows a sample: redrawn in place on a terminal, every tenth
// sample on its own line otherwise.
func (p *progress) sample(s Sample) {
	if p.out.Progress == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples++
	line := p.line(s)
	if p.out.Live {
		fmt.Fprintf(p.out.Progress, "\r\x1b[K%s", line)
		p.pending = true
		return
	}
	if p.samples%10 == 0 {
		fmt.Fprintln(p.out.Progress, line)
	}
}

// end ends a live line.
func (p *progress) end() {
	if p.out.Progress != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.clear()
	}
}

func (p *progress) clear() {
	if p.pending {
		fmt.Fprintln(p.out.Progress)
		p.pending = false
	}
}

// line is "[ 12.0s] published 45 000/100 000 | lag inv 30 123 poi … |
// oldest 8.2s | consumed/s inv 2 100 … | instances 1/1/1/1".
func (p *progress) line(s Sample) string {
	var lag, rate, inst []string
	oldest := 0.0
	for _, g := range s.Groups {
		short := g.Service[:min(3, len(g.Service))]
		l := count(float64(g.Lag))
		if g.Lag < 0 {
			l = "?"
		}
		lag = append(lag, short+" "+l)
		rate = append(rate, short+" "+count(g.ConsumedPerSecond))
		inst = append(inst, fmt.Sprint(len(g.Instances)))
		oldest = max(oldest, g.OldestAge)
	}
	line := fmt.Sprintf("[%6.1fs] published %s/%s | lag %s | oldest %s | consumed/s %s | instances %s",
		s.Elapsed, count(float64(s.Published)), count(float64(p.cfg.Count)),
		strings.Join(lag, " "), seconds(oldest), strings.Join(rate, " "), strings.Join(inst, "/"))
	if len(s.Errors) > 0 {
		line += fmt.Sprintf(" | %d not measured", len(s.Errors))
	}
	return line
}
