package lab

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/forgive-emu/forgive/lab/results"
)

// progress draws one status line: runs done, the current policy and seed,
// the step, and the elapsed time. On a terminal it redraws in place;
// elsewhere (a pipe, a file, CI's log) it prints a line as each run starts,
// a line per finished step and a line per finished run.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	runs     int
	steps    int
	run      int
	policy   string
	seed     uint64
	stepNow  int
	start    time.Time
	runStart time.Time
	// The sim placement's clock: virtual time and events of the current
	// run, and when the line was last drawn.
	sim      bool
	virtual  time.Duration
	events   uint64
	lastDraw time.Time
	// With runs in parallel: the runs under way.
	parallel bool
	running  []string
}

func newProgress(w io.Writer, runs, steps int) *progress {
	p := &progress{w: w, runs: runs, steps: steps, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) setRun(policy string, seed uint64) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run > 0 && !p.tty {
		p.runDone()
	}
	p.run++
	p.policy, p.seed, p.stepNow, p.runStart = policy, seed, 0, time.Now()
	p.virtual, p.events = 0, 0
	if p.tty {
		p.draw()
	} else {
		fmt.Fprintf(p.w, "run %d/%d  %-16s seed %-3d started  %v\n", p.run, p.runs, p.policy, p.seed, time.Since(p.start).Round(time.Second))
	}
}

func (p *progress) step(step int) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty && p.stepNow > 0 && step > p.stepNow {
		p.stepDone() // the step before this one ended as this one began
	}
	p.stepNow = step
	if p.tty {
		p.draw()
	}
}

// stepDone prints, off a terminal, the line of the current step, which
// has ended; the caller holds mu.
func (p *progress) stepDone() {
	line := fmt.Sprintf("run %d/%d  %-16s seed %-3d step %2d/%d done  %v", p.run, p.runs, p.policy, p.seed,
		p.stepNow, p.steps, time.Since(p.start).Round(time.Second))
	if p.sim {
		line += "  " + p.simStatus()
	}
	fmt.Fprintln(p.w, line)
}

// simTime updates the sim placement's virtual time and event count; on a
// terminal the line is redrawn at most every 200 ms of wall time.
func (p *progress) simTime(virtual time.Duration, events uint64) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sim, p.virtual, p.events = true, virtual, events
	if p.tty && time.Since(p.lastDraw) > 200*time.Millisecond {
		p.draw()
	}
}

// simStatus is the sim placement's part of the line: virtual time, the
// run's wall time, and events per wall second.
func (p *progress) simStatus() string {
	wall := time.Since(p.runStart)
	rate := 0.0
	if s := wall.Seconds(); s > 0 {
		rate = float64(p.events) / s
	}
	return fmt.Sprintf("virtual %v, wall %v, %.2f M events/s", p.virtual.Round(time.Microsecond),
		wall.Round(time.Second/10), rate/1e6)
}

// draw prints the line; the caller holds mu.
func (p *progress) draw() {
	const width = 20
	p.lastDraw = time.Now()
	done := width * p.stepNow / max(p.steps, 1)
	bar := strings.Repeat("=", done) + strings.Repeat(" ", width-done)
	line := fmt.Sprintf("run %d/%d  %-16s seed %-3d step %2d/%d [%s] %v", p.run, p.runs, p.policy, p.seed,
		p.stepNow, p.steps, bar, time.Since(p.start).Round(time.Second))
	if p.sim {
		line += "  " + p.simStatus()
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) done() {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintln(p.w)
	} else if p.run > 0 && !p.parallel {
		p.runDone()
	}
}

// runDone prints the end of a run off a terminal, and of its last step;
// the caller holds mu.
func (p *progress) runDone() {
	if p.stepNow > 0 {
		p.stepDone()
	}
	if p.sim {
		fmt.Fprintf(p.w, "  %s seed %d done: %s\n", p.policy, p.seed, p.simStatus())
		return
	}
	fmt.Fprintf(p.w, "  %s seed %d done in %v\n", p.policy, p.seed, time.Since(p.runStart).Round(time.Second/10))
}

// With runs in parallel (--jobs) the line cannot follow one run's steps:
// each run prints one line when it ends, in the order they end, and on a
// terminal a status line below them names the runs under way.

// started notes a run that began in a worker.
func (p *progress) started(policy string, seed uint64) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parallel = true
	p.running = append(p.running, runName(policy, seed))
	if p.tty {
		p.drawRunning()
	}
}

// finished prints the line of a run that ended.
func (p *progress) finished(policy string, seed uint64, r results.Run, wall results.WallRun) {
	p.ended(policy, seed, func() string {
		line := fmt.Sprintf("done in %v", time.Duration(wall.Seconds*float64(time.Second)).Round(time.Second/10))
		if r.SimEvents > 0 {
			line += fmt.Sprintf(": training %.4g s virtual, %.2f M events/s", r.TrainingTimeS, wall.EventsPerS/1e6)
		}
		return line
	})
}

// failed prints the line of a run that failed or was stopped.
func (p *progress) failed(policy string, seed uint64) {
	p.ended(policy, seed, func() string { return "failed or stopped" })
}

func (p *progress) ended(policy string, seed uint64, what func() string) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.run++
	if i := slices.Index(p.running, runName(policy, seed)); i >= 0 {
		p.running = slices.Delete(p.running, i, i+1)
	}
	line := fmt.Sprintf("run %d/%d  %-16s seed %-3d %s  %v", p.run, p.runs, policy, seed, what(), time.Since(p.start).Round(time.Second))
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", line)
		p.drawRunning()
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// drawRunning redraws the terminal's status line; the caller holds mu.
func (p *progress) drawRunning() {
	fmt.Fprintf(p.w, "\r%d/%d done, running: %s  %v\x1b[K", p.run, p.runs, strings.Join(p.running, ", "), time.Since(p.start).Round(time.Second))
}

func runName(policy string, seed uint64) string { return fmt.Sprintf("%s seed %d", policy, seed) }
