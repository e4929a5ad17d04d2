package sim

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	scenariov1alpha1 "github.com/holdfast-dev/holdfast/api/scenario/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Outcome is one expectation of the scenario (spec.expect) and what the run showed.
type Outcome struct {
	// Expectation is the expectation's field in the scenario, e.g.
	// spec.expect.maxUnavailable or spec.expect.workloads[0].minReady.
	Expectation string `json:"expectation"`
	// Subject is what it was measured on: a workload ("Deployment ns/name") or a drain
	// ("drain node-0,node-1").
	Subject string `json:"subject"`
	// Want is the expectation and Got the figure, in words.
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// String is the outcome in one line: the expectation, its subject, the figure and the want.
func (o Outcome) String() string {
	return fmt.Sprintf("%s: %s: %s, want %s", o.Expectation, o.Subject, o.Got, o.Want)
}

// Unmet is the outcomes of the expectations the run did not meet.
func (r *Result) Unmet() []Outcome {
	var out []Outcome
	for _, o := range r.Expectations {
		if !o.Met {
			out = append(out, o)
		}
	}
	return out
}

// checkExpectations names a workload that spec.expect.workloads gives limits for and the
// scenario never has: neither its objects nor an apply name it.
func (s *sim) checkExpectations() error {
	x := s.sc.Spec.Expect
	if x == nil {
		return nil
	}
	applied := map[workload.Ref]bool{}
	for _, st := range s.sc.Spec.Timeline {
		if st.Apply != nil {
			applied[refOf(st.Apply.Workload)] = true
		}
	}
	for i, w := range x.Workloads {
		if ref := refOf(w.Workload); s.byRef[ref] == nil && !applied[ref] {
			return fmt.Errorf("%s: spec.expect.workloads[%d].workload: no %s in the scenario", s.sc.Source, i, ref)
		}
	}
	return nil
}

// expect measures the scenario's expectations on the finished run's figures.
func (s *sim) expect() {
	x := s.sc.Spec.Expect
	if x == nil {
		return
	}
	at := field.NewPath("spec", "expect")
	for _, w := range s.workloads {
		s.expectLimits(x.Limits, at, w)
	}
	for i, we := range x.Workloads {
		s.expectLimits(we.Limits, at.Child("workloads").Index(i), s.byRef[refOf(we.Workload)])
	}
	s.expectBounded(x, at)
	if x.Drained != nil {
		for _, d := range s.res.Drains {
			all := d.Drained == d.Requested
			o := Outcome{Expectation: at.Child("drained").String(), Subject: "drain " + d.Nodes,
				Got: fmt.Sprintf("drained %d of %d nodes", d.Drained, d.Requested), Met: all == *x.Drained}
			o.Want = "every node drained"
			if !*x.Drained {
				o.Want = "a node left undrained"
			}
			s.res.Expectations = append(s.res.Expectations, o)
		}
	}
}

// expectBounded measures the forced deletes of each drain and the released evictions.
func (s *sim) expectBounded(x *scenariov1alpha1.Expectations, at *field.Path) {
	if x.MaxForced != nil {
		for _, d := range s.res.Drains {
			s.res.Expectations = append(s.res.Expectations, Outcome{Expectation: at.Child("maxForced").String(), Subject: "drain " + d.Nodes,
				Want: fmt.Sprintf("at most %s forced", plural(int(*x.MaxForced), "pod")), Got: fmt.Sprintf("%s forced", plural(d.Forced, "pod")),
				Met: d.Forced <= int(*x.MaxForced)})
		}
	}
	if x.MinReleased != nil {
		got := s.res.Requests.EvictionsReleased
		s.res.Expectations = append(s.res.Expectations, Outcome{Expectation: at.Child("minReleased").String(), Subject: "the run",
			Want: fmt.Sprintf("at least %s released after maxHold", plural(int(*x.MinReleased), "eviction")),
			Got:  fmt.Sprintf("%s released", plural(got, "eviction")), Met: got >= int(*x.MinReleased)})
	}
}

// expectLimits measures the limits at path on the workload w's figures.
func (s *sim) expectLimits(l scenariov1alpha1.Limits, at *field.Path, w *simWorkload) {
	f := w.fig
	add := func(name, want, got string, met bool) {
		s.res.Expectations = append(s.res.Expectations, Outcome{Expectation: at.Child(name).String(), Subject: w.ref.String(),
			Want: want, Got: got, Met: met})
	}
	if n := l.MaxTemplatesWithLivePods; n != nil {
		add("maxTemplatesWithLivePods", fmt.Sprintf("at most %d", *n), plural(f.PeakRevisionsWithPods, "template")+" with live pods at once",
			f.PeakRevisionsWithPods <= int(*n))
	}
	if n := l.MaxRevisions; n != nil {
		add("maxRevisions", fmt.Sprintf("at most %d", *n), plural(f.Revisions, "revision")+" made", f.Revisions <= int(*n))
	}
	if n := l.MaxUnavailable; n != nil {
		add("maxUnavailable", fmt.Sprintf("at most %d", *n), plural(f.MaxUnavailable, "pod")+" unavailable at once", f.MaxUnavailable <= int(*n))
	}
	if n := l.MinReady; n != nil {
		add("minReady", fmt.Sprintf("at least %d", *n), plural(f.MinReady, "pod")+" Ready at the fewest", f.MinReady >= int(*n))
	}
	if d := l.MinEvictionGap; d != nil {
		got := fmt.Sprintf("evictions %gs apart at the closest", f.MinEvictionGapSeconds)
		if f.MinEvictionGapSeconds < 0 {
			got = plural(f.Evictions, "eviction")
		}
		add("minEvictionGap", "at least "+d.Duration.String(), got, f.MinEvictionGapSeconds < 0 || f.MinEvictionGapSeconds >= d.Duration.Seconds())
	}
	if d := l.MaxDisruptedDomains; d != nil {
		n := f.MaxDisruptedDomains[d.Key]
		add("maxDisruptedDomains", fmt.Sprintf("at most %d %s", d.Max, d.Key), fmt.Sprintf("%s with pods evicted and not yet replaced at once", plural(n, d.Key+" domain")),
			n <= int(d.Max))
	}
	if want := l.WritersFighting; want != nil {
		got := "no writers reported fighting"
		if f.WritersFighting != nil {
			got = fmt.Sprintf("WritersFighting: field managers %q then %q", f.WritersFighting[0], f.WritersFighting[1])
		}
		add("writersFighting", map[bool]string{true: "two writers reported fighting", false: "none reported"}[*want], got, (f.WritersFighting != nil) == *want)
	}
	if want := l.RefusalNamesWriters; want != nil {
		add("refusalNamesWriters", map[bool]string{true: "a refusal naming both writers", false: "none naming both"}[*want],
			plural(f.RefusalsNamingWriters, "refusal")+" naming both writers", (f.RefusalsNamingWriters > 0) == *want)
	}
	// Only a workload an operator drives converges on something: a top-level limit is
	// not held against the others.
	if d := l.ConvergedWithin; d != nil && w.op != nil {
		got := fmt.Sprintf("converged at %gs", f.ConvergedSeconds)
		if !f.Converged {
			got = fmt.Sprintf("not converged at the end (%gs), after %s", s.res.Seconds, plural(f.Refusals, "refusal"))
		}
		add("convergedWithin", "within "+d.Duration.String(), got, f.Converged && f.ConvergedSeconds <= d.Duration.Seconds())
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
