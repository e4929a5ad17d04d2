package sim

import (
	"fmt"
	"io"
	"strings"
)

// Result is what a scenario's run did and measured.
type Result struct {
	Scenario    string  `json:"scenario"`
	Description string  `json:"description,omitempty"`
	Timeline    []Entry `json:"timeline"`
	// Seconds is how long the scenario ran, on the virtual clock.
	Seconds float64 `json:"seconds"`
	// TimedOut is a scenario still running at spec.until.
	TimedOut  bool              `json:"timedOut,omitempty"`
	Workloads []WorkloadFigures `json:"workloads"`
	Drains    []*DrainFigures   `json:"drains,omitempty"`
	Requests  RequestFigures    `json:"requests"`
	// Errors are what went wrong inside the simulation (not refusals).
	Errors []string `json:"errors,omitempty"`
	// Expectations are the scenario's expectations (spec.expect), each with what the run
	// showed.
	Expectations []Outcome `json:"expectations,omitempty"`
}

// Entry is one request and holdfast's answer, or one event of the timeline.
type Entry struct {
	// At is seconds from the start.
	At      float64 `json:"at"`
	Request string  `json:"request"`
	Object  string  `json:"object"`
	By      string  `json:"by,omitempty"`
	Answer  string  `json:"answer"`
	Message string  `json:"message,omitempty"`
	// RetryIn is when the operator tries again, in seconds.
	RetryIn float64 `json:"retryIn,omitempty"`
}

// WorkloadFigures are one workload's figures over the run.
type WorkloadFigures struct {
	Workload string `json:"workload"`
	// Revisions counts its ReplicaSets or ControllerRevisions.
	Revisions int `json:"revisions"`
	// PeakRevisionsWithPods is the most revisions with pods at once.
	PeakRevisionsWithPods int `json:"peakRevisionsWithPods"`
	// PeakPods is the most pods at once, terminating ones not counted.
	PeakPods int `json:"peakPods"`
	// MaxUnavailable is the most of the wanted pods not serving (Ready and not
	// terminating) at once; MinReady the fewest serving; both from the first moment all
	// served (a new workload's pods starting up are not a disruption).
	MaxUnavailable int `json:"maxUnavailable"`
	MinReady       int `json:"minReady"`
	// Evictions counts its pods evicted; MinEvictionGapSeconds is the least time between
	// two (-1 with fewer than two).
	Evictions             int     `json:"evictions"`
	MinEvictionGapSeconds float64 `json:"minEvictionGapSeconds"`
	// Refusals counts its operator's refused changes; Converged is the operator's last
	// change admitted and rolled out.
	Refusals  int  `json:"refusals"`
	Converged bool `json:"converged"`
	// ConvergedSeconds is when it converged for good, in seconds from the start (0 for a
	// workload that never changed); -1 when it did not.
	ConvergedSeconds float64 `json:"convergedSeconds"`
	// MaxDisruptedDomains is, by node label, the most of its values (topology domains) with
	// pods of the workload evicted and not yet replaced at once; only for the labels the
	// scenario's expectations name.
	MaxDisruptedDomains map[string]int `json:"maxDisruptedDomains,omitempty"`
	// WritersFighting are the first two field managers holdfast reported alternating its
	// templates within the revertWindow (WritersFighting), in the order they wrote; none
	// when it reported none.
	WritersFighting []string `json:"writersFighting,omitempty"`
	// RefusalsNamingWriters counts its refused changes whose message names both the
	// request's field manager and the one that last changed its template.
	RefusalsNamingWriters int `json:"refusalsNamingWriters,omitempty"`
}

// DrainFigures are one drain's figures.
type DrainFigures struct {
	Nodes     string `json:"nodes"`
	Requested int    `json:"requested"`
	Drained   int    `json:"drained"`
	// Seconds is from the drain's start until its last node was empty.
	Seconds   float64 `json:"seconds"`
	Evictions int     `json:"evictions"`
	Deferred  int     `json:"deferred"`
	Refused   int     `json:"refused"`
	// Released are the evictions holdfast admitted as released after maxHold.
	Released int `json:"released,omitempty"`
	// Forced are the pods the drainer deleted at its deadline (forceAfter), unbudgeted.
	Forced int `json:"forced,omitempty"`
	// Deletes are the pods a drain that does not evict (disableEviction) deleted.
	Deletes int `json:"deletes,omitempty"`
}

// RequestFigures count the requests holdfast answered.
type RequestFigures struct {
	RolloutAdmitted   int `json:"rolloutAdmitted"`
	RolloutRefused    int `json:"rolloutRefused"`
	EvictionsAllowed  int `json:"evictionsAllowed"`
	EvictionsDeferred int `json:"evictionsDeferred"`
	EvictionsRefused  int `json:"evictionsRefused"`
	// EvictionsReleased are the allowed evictions holdfast let go after maxHold.
	EvictionsReleased int `json:"evictionsReleased,omitempty"`
	// DeletesAllowed and DeletesRefused are the pod DELETEs of drains that do not evict
	// (disableEviction), as holdfast answered them.
	DeletesAllowed int `json:"deletesAllowed,omitempty"`
	DeletesRefused int `json:"deletesRefused,omitempty"`
}

// Write prints the result for people: the timeline, a deferral streak by its first
// answer, then the figures.
func (r *Result) Write(out io.Writer) {
	fmt.Fprintf(out, "scenario %s", r.Scenario)
	if r.Description != "" {
		fmt.Fprintf(out, ": %s", strings.TrimSpace(r.Description))
	}
	fmt.Fprintln(out)
	for _, e := range r.Timeline {
		line := fmt.Sprintf("%7.1fs  %-8s %s", e.At, e.Request, e.Object)
		if e.By != "" {
			line += " by " + e.By
		}
		line += ": " + e.Answer
		if e.Message != "" {
			line += " " + e.Message
		}
		if e.RetryIn > 0 {
			line += fmt.Sprintf(" (requeued in %gs)", e.RetryIn)
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "figures after %.1fs", r.Seconds)
	if r.TimedOut {
		fmt.Fprint(out, " (still running at spec.until)")
	}
	fmt.Fprintln(out, ":")
	for _, w := range r.Workloads {
		fmt.Fprintf(out, "  %s: revisions=%d peakRevisionsWithPods=%d peakPods=%d maxUnavailable=%d minReady=%d evictions=%d minEvictionGapSeconds=%g refusals=%d converged=%t\n",
			w.Workload, w.Revisions, w.PeakRevisionsWithPods, w.PeakPods, w.MaxUnavailable, w.MinReady, w.Evictions, w.MinEvictionGapSeconds, w.Refusals, w.Converged)
	}
	for _, d := range r.Drains {
		fmt.Fprintf(out, "  drain %s: drained=%d/%d seconds=%g evictions=%d deferred=%d refused=%d released=%d forced=%d deletes=%d\n",
			d.Nodes, d.Drained, d.Requested, d.Seconds, d.Evictions, d.Deferred, d.Refused, d.Released, d.Forced, d.Deletes)
	}
	q := r.Requests
	fmt.Fprintf(out, "  requests: rollouts admitted=%d refused=%d; evictions allowed=%d deferred=%d refused=%d released=%d; deletes allowed=%d refused=%d\n",
		q.RolloutAdmitted, q.RolloutRefused, q.EvictionsAllowed, q.EvictionsDeferred, q.EvictionsRefused, q.EvictionsReleased, q.DeletesAllowed, q.DeletesRefused)
	for _, e := range r.Errors {
		fmt.Fprintf(out, "  error: %s\n", e)
	}
	if len(r.Expectations) == 0 {
		return
	}
	fmt.Fprintln(out, "expectations:")
	for _, o := range r.Expectations {
		mark := "met  "
		if !o.Met {
			mark = "UNMET"
		}
		fmt.Fprintf(out, "  %s %s\n", mark, o)
	}
	fmt.Fprintf(out, "%d of %d expectations met\n", len(r.Expectations)-len(r.Unmet()), len(r.Expectations))
}

// Workload is the figures of the workload named "Kind namespace/name", or nil.
func (r *Result) Workload(name string) *WorkloadFigures {
	for i := range r.Workloads {
		if r.Workloads[i].Workload == name {
			return &r.Workloads[i]
		}
	}
	return nil
}
