package check

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/policyreport"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// write prints the report in the format o.Output names.
func write(out io.Writer, report Report, o *Options) error {
	switch o.Output {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	case "yaml":
		b, err := yaml.Marshal(report)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	case "junit":
		return app.WriteJUnit(out, JUnit(report, o))
	case "policyreport":
		for i, r := range PolicyReports(report) {
			b, err := yaml.Marshal(r.Object)
			if err != nil {
				return err
			}
			if i > 0 {
				if _, err := io.WriteString(out, "---\n"); err != nil {
					return err
				}
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range report.Results {
		fmt.Fprintf(out, "%s %s: %s\n", r.Operation, r.Object, r.Action)
		for _, m := range r.decision.Messages(decision.Audit) {
			fmt.Fprintf(out, "  %s\n", m)
		}
		for _, u := range r.Undecided {
			fmt.Fprintf(out, "  %s\n", u)
		}
	}
	if report.Skipped > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(report.SkippedKinds)) {
			kinds = append(kinds, fmt.Sprintf("%s (%d)", k, report.SkippedKinds[k]))
		}
		fmt.Fprintf(out, "skipped %d documents of kinds holdfast does not judge: %s\n", report.Skipped, strings.Join(kinds, ", "))
	}
	return nil
}

// The JUnit types are the offline commands' (app.JUnitSuite): a case per workload change
// and policy, or per document skipped (Classname is the change, e.g. "UPDATE Deployment
// ns/name", or the skipped document's source; Name the policy, or the document's kind).
type (
	JUnitSuite   = app.JUnitSuite
	JUnitCase    = app.JUnitCase
	JUnitFailure = app.JUnitFailure
	JUnitSkipped = app.JUnitSkipped
)

// JUnit is the report as a JUnit test suite: a test case per (change, policy) pair that
// was evaluated, failed when the policy refuses the change (or warns, with --fail-on-warn,
// or has a rule not decided, with --fail-on-undecided), skipped when it has a rule not
// decided and refuses nothing; and a skipped test case per document check does not judge.
func JUnit(report Report, o *Options) JUnitSuite {
	suite := JUnitSuite{Name: "holdfast check"}
	for _, r := range report.Results {
		class := r.Operation + " " + r.Object
		for _, p := range r.Policies {
			c := JUnitCase{Classname: class, Name: p}
			mine, undecided := r.of(p)
			lines := mine.Messages(decision.Audit)
			for _, u := range undecided {
				lines = append(lines, u.String())
			}
			messages := strings.Join(lines, "\n")
			switch a := mine.Action(); {
			case fails(a, len(undecided) > 0, o):
				typ := a.String()
				if a < decision.Warn || (a == decision.Warn && !o.FailOnWarn) {
					typ = ActionUndecided
				}
				c.Failure = &JUnitFailure{Message: typ, Type: typ, Text: messages}
				suite.Failures++
			case len(undecided) > 0:
				c.Skipped = &JUnitSkipped{Message: undecided[0].String()}
				c.SystemOut = messages
				suite.Skipped++
			default:
				c.SystemOut = messages
			}
			suite.Cases = append(suite.Cases, c)
		}
	}
	for _, doc := range report.skipped {
		kind := kindOf(doc)
		suite.Cases = append(suite.Cases, JUnitCase{Classname: doc.Source, Name: kind,
			Skipped: &JUnitSkipped{Message: "holdfast does not judge " + kind}})
		suite.Skipped++
	}
	suite.Tests = len(suite.Cases)
	return suite
}

// of is what the policy named found of the change, and its rules not decided.
func (r Result) of(policy string) (decision.Violations, []Undecided) {
	var mine decision.Violations
	for _, v := range r.decision {
		if v.Policy == policy {
			mine = append(mine, v)
		}
	}
	var undecided []Undecided
	for _, u := range r.Undecided {
		if u.Policy == policy {
			undecided = append(undecided, u)
		}
	}
	return mine, undecided
}

// PolicyReport is one PolicyReport check prints: a policy's results in one namespace.
type PolicyReport struct {
	Namespace, Policy string
	Object            map[string]any
}

// PolicyReports are the report as the background audit writes PolicyReports
// (internal/policyreport): one per policy and namespace, in the order the changes were
// given, with a result per change and rule the policy enables (and per rule it found
// otherwise: selection, targets): fail for a refusal or an Audit policy's finding, warn for
// a Warn policy's, skip for a rule not decided or a change a temporary exemption let
// through, pass otherwise.
func PolicyReports(report Report) []PolicyReport {
	type key struct{ namespace, policy string }
	var order []key
	type built struct {
		results []any
		summary policyreport.Summary
	}
	reports := map[key]*built{}
	for _, r := range report.Results {
		w := r.workload
		for _, name := range r.Policies {
			k := key{w.Namespace, name}
			b := reports[k]
			if b == nil {
				b = &built{}
				reports[k] = b
				order = append(order, k)
			}
			for _, res := range resultsOf(r, name, report.policy(name)) {
				b.summary.Count(res.result)
				b.results = append(b.results, policyreport.Result(name, res.rule, res.result, res.message, w, report.now))
			}
		}
	}
	out := make([]PolicyReport, 0, len(order))
	for _, k := range order {
		b := reports[k]
		out = append(out, PolicyReport{Namespace: k.namespace, Policy: k.policy, Object: policyreport.New(k.namespace, k.policy, b.results, b.summary).Object})
	}
	return out
}

// policy is the policy named, nil when check was not given it.
func (r Report) policy(name string) *v1alpha1.RolloutPolicy {
	for i := range r.policies {
		if r.policies[i].Name == name {
			return &r.policies[i]
		}
	}
	return nil
}

type ruleResult struct{ rule, result, message string }

// resultsOf is a result per rule of the policy on the change: the rules it enables, in
// the order it reports them, then those it found that it does not enable (selection,
// targets). What a temporary exemption let through is its record alone.
func resultsOf(r Result, name string, p *v1alpha1.RolloutPolicy) []ruleResult {
	mine, undecided := r.of(name)
	var rules []string
	if p != nil {
		rules = rollout.RulesOf(p)
	}
	byRule := map[string]*ruleResult{}
	add := func(rule, result, message string) {
		if res, ok := byRule[rule]; ok {
			res.message += "; " + message
			return
		}
		byRule[rule] = &ruleResult{rule, result, message}
		if !slices.Contains(rules, rule) {
			rules = append(rules, rule)
		}
	}
	for _, v := range mine {
		switch {
		case v.Rule == decision.RuleExemption:
			rules = nil
			add(v.Rule, policyreport.Skip, v.Message)
		case v.Action == decision.Warn:
			add(v.Rule, policyreport.Warn, v.Message)
		default:
			add(v.Rule, policyreport.Fail, v.Message)
		}
	}
	for _, u := range undecided {
		add(u.Rule, policyreport.Skip, u.String())
	}
	out := make([]ruleResult, 0, len(rules))
	for _, rule := range rules {
		if res, ok := byRule[rule]; ok {
			out = append(out, *res)
		} else {
			out = append(out, ruleResult{rule, policyreport.Pass, ""})
		}
	}
	return out
}
