package eviction

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
)

// The features the eviction model generates, and the checker's own reading of them: the
// budgets resolved as kube's PDB arithmetic rounds, the windows evaluated from their cron
// fields minute by minute, the identities an entry names known by construction. None of it
// calls holdfast's policy package.

// identity is one requester of evictions, as the API server authenticates it.
type identity struct {
	name string
	user authenticationv1.UserInfo
	// names are the forms a policy entry may name it by: a user, a group, a service account.
	users, groups, serviceAccounts []string
}

var identities = []identity{
	{name: "kubectl", user: authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}},
		users: []string{"kubernetes-admin"}, groups: []string{"system:masters"}},
	{name: "cluster-autoscaler", user: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:cluster-autoscaler",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}},
		users: []string{"system:serviceaccount:kube-system:cluster-autoscaler"}, serviceAccounts: []string{"kube-system/cluster-autoscaler"}},
	{name: "karpenter", user: authenticationv1.UserInfo{Username: "system:serviceaccount:karpenter:karpenter",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:karpenter", "system:authenticated"}},
		users: []string{"system:serviceaccount:karpenter:karpenter"}, groups: []string{"system:serviceaccounts:karpenter"}, serviceAccounts: []string{"karpenter/karpenter"}},
	{name: "node-drainer", user: authenticationv1.UserInfo{Username: "system:serviceaccount:ops:node-drainer",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ops", "system:authenticated"}},
		users: []string{"system:serviceaccount:ops:node-drainer"}, groups: []string{"system:serviceaccounts:ops"}, serviceAccounts: []string{"ops/node-drainer"}},
}

// naming is how an entry names one identity: its users, groups and service accounts.
func naming(who, form int) (users, groups, sas []string) {
	id := identities[who]
	forms := [][3][]string{{id.users, nil, nil}, {nil, id.groups, nil}, {nil, nil, id.serviceAccounts}}
	for i := range 3 {
		f := forms[(form+i)%3]
		if len(f[0])+len(f[1])+len(f[2]) > 0 {
			return f[0], f[1], f[2]
		}
	}
	return nil, nil, nil
}

type mrequester struct {
	who, form int
	max       *intstr.IntOrString
	cooldown  time.Duration
}

type mtemporary struct {
	who, form int
	expires   time.Time
}

// startTimes put sequences on ordinary days and on the days clocks change, so that windows
// in those time zones open and close across a change.
var startTimes = []time.Time{
	time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	time.Date(2026, 3, 29, 0, 50, 0, 0, time.UTC),  // Europe/Berlin springs forward at 01:00 UTC
	time.Date(2026, 10, 25, 0, 50, 0, 0, time.UTC), // Europe/Berlin falls back at 01:00 UTC
	time.Date(2026, 11, 1, 5, 50, 0, 0, time.UTC),  // America/New_York falls back at 06:00 UTC
	time.Date(2026, 3, 8, 6, 50, 0, 0, time.UTC),   // America/New_York springs forward at 07:00 UTC
}

var timeZones = []string{"", "UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"}

func win(name, schedule string, d time.Duration, action v1alpha1.WindowAction, tz string) v1alpha1.Window {
	return v1alpha1.Window{Name: name, Schedule: schedule, Duration: metav1.Duration{Duration: d}, Action: action, TimeZone: tz}
}

// windowSets are the windows a policy may have: short recurring Deny and Allow windows,
// back-to-back ones, and daily ones opening at local midnight whose elapsed duration spans
// a daylight-saving change on the days startTimes pick.
func windowSets(tz string) [][]v1alpha1.Window {
	return [][]v1alpha1.Window{
		{win("freeze", "*/20 * * * *", 5*time.Minute, v1alpha1.WindowDeny, tz)},
		{win("slots", "*/10 * * * *", 6*time.Minute, v1alpha1.WindowAllow, tz)},
		{win("first", "0 * * * *", 25*time.Minute, v1alpha1.WindowDeny, tz), win("second", "25 * * * *", 20*time.Minute, v1alpha1.WindowDeny, tz)},
		{win("am", "0 * * * *", 30*time.Minute, v1alpha1.WindowAllow, tz), win("pm", "30 * * * *", 30*time.Minute, v1alpha1.WindowAllow, tz)},
		{win("night-freeze", "0 0 * * *", 3*time.Hour, v1alpha1.WindowDeny, tz)},
		{win("night", "0 0 * * *", 3*time.Hour, v1alpha1.WindowAllow, tz)},
	}
}

// features draws the policy options of a sequence.
func (c *modelConfig) features(r *rand.Rand) {
	c.Start = startTimes[r.IntN(len(startTimes))]
	c.Mode = []v1alpha1.Mode{v1alpha1.ModeEnforce, v1alpha1.ModeEnforce, v1alpha1.ModeEnforce, v1alpha1.ModeEnforce, "", v1alpha1.ModeWarn, v1alpha1.ModeAudit}[r.IntN(7)]
	switch r.IntN(12) {
	case 0:
		c.Budget = intstr.FromInt32(0)
	case 1:
		c.Budget = intstr.FromString("0%")
	case 2:
		c.Budget = intstr.FromString("50%")
	}
	c.DaemonSetZero = r.IntN(6) == 0
	maxes := []*intstr.IntOrString{nil, ptr.To(intstr.FromInt32(0)), ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromString("50%")), ptr.To(intstr.FromString("0%")), ptr.To(intstr.FromInt32(2))}
	for range r.IntN(4) {
		c.Requesters = append(c.Requesters, mrequester{who: r.IntN(len(identities)), form: r.IntN(3), max: maxes[r.IntN(len(maxes))],
			cooldown: []time.Duration{0, 0, 15 * time.Second, 40 * time.Second}[r.IntN(4)]})
	}
	c.Permanent = -1
	if r.IntN(4) == 0 {
		c.Permanent, c.PermanentForm = r.IntN(len(identities)), r.IntN(3)
	}
	for range r.IntN(3) {
		c.Temporary = append(c.Temporary, mtemporary{who: r.IntN(len(identities)), form: r.IntN(3),
			expires: c.Start.Add(time.Duration(r.Int64N(int64(15 * time.Minute))))})
	}
	if r.IntN(2) == 0 {
		tz := timeZones[r.IntN(len(timeZones))]
		sets := windowSets(tz)
		for range 1 + r.IntN(2) {
			c.Windows = append(c.Windows, sets[r.IntN(len(sets))]...)
		}
	}
	if r.IntN(3) == 0 {
		c.MaxHold = []time.Duration{8 * time.Second, 30 * time.Second}[r.IntN(2)]
	}
	// afterMaxHold is drawn apart from the sequence's generator, which the other options and
	// the operations keep drawing from as before: Release in half the sequences with a
	// maxHold, and with a short maxHold in a quarter of those without.
	if r2 := rand.New(rand.NewPCG(c.Seed, 0xa17e)); c.MaxHold > 0 && r2.IntN(2) == 0 {
		c.AfterMaxHold = v1alpha1.AfterMaxHoldRelease
	} else if c.MaxHold == 0 && r2.IntN(4) == 0 {
		c.MaxHold, c.AfterMaxHold = 8*time.Second, v1alpha1.AfterMaxHoldRelease
	}
	c.Shared = r.IntN(3) == 0
	if r.IntN(3) == 0 {
		c.Zones, c.MaxZones = 2+r.IntN(2), 1+r.IntN(2)
	}
	c.StallAfter = []time.Duration{0, 90 * time.Second}[r.IntN(2)]
	if r.IntN(3) == 0 {
		c.PDB = ptr.To([]intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("25%"), intstr.FromInt32(2)}[r.IntN(3)])
		c.PDBUnhealthy = []policyv1.UnhealthyPodEvictionPolicyType{policyv1.AlwaysAllow, policyv1.IfHealthyBudget}[r.IntN(2)]
	}
}

// optionsOf names the options a sequence's policy uses, for the histogram.
func optionsOf(c modelConfig) []string {
	mode := string(c.Mode)
	if mode == "" {
		mode = "default"
	}
	out := []string{"mode=" + mode, "unhealthy=" + string(c.Unhealthy)}
	if c.Budget.Type == intstr.String {
		out = append(out, "budget=percent")
	} else {
		out = append(out, "budget=number")
	}
	if c.Budget.IntValue() == 0 && c.Budget.StrVal != "50%" && c.Budget.StrVal != "34%" {
		out = append(out, "budget=zero")
	}
	if c.DaemonSetZero {
		out = append(out, "budget=against0pods")
	}
	if c.Cooldown > 0 {
		out = append(out, "cooldown")
	}
	if c.MinReady > 0 {
		out = append(out, "minReady")
	}
	for _, q := range c.Requesters {
		out = append(out, "requester="+identities[q.who].name)
		if q.max != nil && q.max.Type == intstr.String {
			out = append(out, "requester=percent")
		}
		if q.cooldown > 0 {
			out = append(out, "requester=cooldown")
		}
	}
	if c.Permanent >= 0 {
		out = append(out, "exemption=permanent")
	}
	if len(c.Temporary) > 0 {
		out = append(out, "exemption=temporary")
	}
	for _, w := range c.Windows {
		out = append(out, "window="+string(w.Action))
		if w.Schedule == "0 0 * * *" && w.TimeZone != "" && w.TimeZone != "UTC" && w.TimeZone != "Asia/Kolkata" && !c.Start.Equal(startTimes[0]) {
			out = append(out, "window=dstDay")
		}
		if w.Name == "second" || w.Name == "pm" {
			out = append(out, "window=backToBack")
		}
		if w.TimeZone != "" {
			out = append(out, "window=timeZone")
		}
	}
	if c.MaxHold > 0 {
		out = append(out, "maxHold")
	}
	if c.AfterMaxHold != "" {
		out = append(out, "afterMaxHold="+string(c.AfterMaxHold))
	}
	if c.Shared {
		out = append(out, "sharedBudget")
	}
	if c.Zones > 0 {
		out = append(out, fmt.Sprintf("topologyBudget=%dof%d", c.MaxZones, c.Zones))
	}
	if c.PDB != nil {
		out = append(out, "kubePDB")
	}
	return out
}

// policySpec is the DisruptionPolicy a sequence starts with.
func policySpec(c modelConfig) v1alpha1.DisruptionPolicySpec {
	spec := v1alpha1.DisruptionPolicySpec{Mode: c.Mode, MaxUnavailable: ptr.To(c.Budget), MinReadySeconds: c.MinReady,
		UnhealthyPodEvictionPolicy: ptr.To(c.Unhealthy), Windows: c.Windows, GuardDeletes: true,
		Targets: v1alpha1.PodTargets{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "guarded", Operator: metav1.LabelSelectorOpExists}}}}}
	if c.Cooldown > 0 {
		spec.Cooldown = &metav1.Duration{Duration: c.Cooldown}
	}
	if c.MaxHold > 0 {
		spec.MaxHold = &metav1.Duration{Duration: c.MaxHold}
		spec.AfterMaxHold = c.AfterMaxHold
	}
	if c.Zones > 0 {
		spec.TopologyBudget = &v1alpha1.TopologyBudget{Key: zoneKey, MaxDisruptedDomains: int32(c.MaxZones)}
	}
	for _, q := range c.Requesters {
		users, groups, sas := naming(q.who, q.form)
		e := v1alpha1.Requester{Users: users, Groups: groups, ServiceAccounts: sas, MaxUnavailable: q.max}
		if q.cooldown > 0 {
			e.Cooldown = &metav1.Duration{Duration: q.cooldown}
		}
		spec.Requesters = append(spec.Requesters, e)
	}
	if c.Permanent >= 0 {
		spec.Exemptions.Users, spec.Exemptions.Groups, spec.Exemptions.ServiceAccounts = naming(c.Permanent, c.PermanentForm)
	}
	for i, t := range c.Temporary {
		users, groups, sas := naming(t.who, t.form)
		spec.Exemptions.Temporary = append(spec.Exemptions.Temporary, v1alpha1.TemporaryExemption{Users: users, Groups: groups, ServiceAccounts: sas,
			Expires: metav1.NewTime(t.expires), Reason: fmt.Sprintf("CHG-%d", i)})
	}
	return spec
}

// kubeBudget resolves a maxUnavailable as kube's disruption controller does for a PDB
// (pkg/controller/disruption/disruption.go, getExpectedScale and
// intstr.GetScaledValueFromIntOrPercent with roundUp): a percentage of the expected pods,
// rounded up; unset is 1, as the policy's default.
func kubeBudget(v *intstr.IntOrString, expected int32) int32 {
	if v == nil {
		return 1
	}
	if v.Type == intstr.Int {
		return max(v.IntVal, 0)
	}
	pct, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil {
		return 0
	}
	return int32(math.Ceil(float64(pct) * float64(expected) / 100))
}

// explicitZero is a budget written as no pod at all: it forbids whatever the group's size.
func explicitZero(v *intstr.IntOrString) bool {
	return v != nil && ((v.Type == intstr.Int && v.IntVal <= 0) || v.StrVal == "0%")
}

// requesterOf is the first requester entry that names who, as the generator wrote it.
func (c modelConfig) requesterOf(who int) *mrequester {
	for i := range c.Requesters {
		if c.Requesters[i].who == who {
			return &c.Requesters[i]
		}
	}
	return nil
}

// cronField matches one field of the schedules windowSets writes: "*", "*/n" or a number.
func cronField(f string, v int) bool {
	if f == "*" {
		return true
	}
	if n, ok := strings.CutPrefix(f, "*/"); ok {
		k, _ := strconv.Atoi(n)
		return v%k == 0
	}
	k, _ := strconv.Atoi(f)
	return k == v
}

// windowOpen is whether some opening of w (a whole minute whose local time matches the
// schedule's minute and hour) lies in (t-duration, t]: the duration is elapsed time.
func windowOpen(w v1alpha1.Window, t time.Time) bool {
	loc := time.UTC
	if w.TimeZone != "" {
		loc, _ = time.LoadLocation(w.TimeZone)
	}
	f := strings.Fields(w.Schedule)
	for m := t.Truncate(time.Minute); t.Sub(m) < w.Duration.Duration; m = m.Add(-time.Minute) {
		l := m.In(loc)
		if cronField(f[0], l.Minute()) && cronField(f[1], l.Hour()) {
			return true
		}
	}
	return false
}

// windowsHold is whether the windows hold evictions at t: a Deny window is open, or there
// are Allow windows and none is.
func windowsHold(ws []v1alpha1.Window, t time.Time) bool {
	allows, allowed := false, false
	for _, w := range ws {
		open := windowOpen(w, t)
		if w.Action == v1alpha1.WindowDeny && open {
			return true
		}
		if w.Action == v1alpha1.WindowAllow {
			allows, allowed = true, allowed || open
		}
	}
	return allows && !allowed
}

// exception is the checker's one registry of why the policy's limits do not bind an
// eviction by who now: a permanent exemption, a temporary one that has not expired on any
// replica's clock, a policy that only warns or audits, or (through replica i) a hold of the
// pod that has lasted maxHold under afterMaxHold Release, whose own holds then go (the
// budget as the PDB counts it stays: E1 checks it so). Empty when they bind.
func (w *world) exception(i int, p *mpod, who int, deleting bool) string {
	if w.cfg.Permanent == who {
		return "exempt"
	}
	for _, t := range w.cfg.Temporary {
		if t.who == who && w.now.Before(t.expires.Add(budget.MaxClockSkew)) {
			return "temporary"
		}
	}
	if w.cfg.Mode == v1alpha1.ModeWarn || w.cfg.Mode == v1alpha1.ModeAudit {
		return string(w.cfg.Mode)
	}
	if !deleting && w.heldFor(i, p) >= w.cfg.MaxHold-time.Second && w.releases() {
		return "released"
	}
	return ""
}

// mustAdmit is an exception that admits on every replica's clock: a way out the policy
// documents (an exemption, a policy that only warns or audits).
func (w *world) mustAdmit(who int) bool {
	if w.cfg.Permanent == who || w.cfg.Mode == v1alpha1.ModeWarn || w.cfg.Mode == v1alpha1.ModeAudit {
		return true
	}
	for _, t := range w.cfg.Temporary {
		if t.who == who && w.now.Before(t.expires.Add(-budget.MaxClockSkew)) {
			return true
		}
	}
	return false
}

// releases is a policy in force that lets its holds go after maxHold.
func (w *world) releases() bool {
	return w.cfg.MaxHold > 0 && w.cfg.AfterMaxHold == v1alpha1.AfterMaxHoldRelease
}

// heldFor is how long replica i has deferred the pod's evictions without a break, as the
// checker follows them (held); zero when it holds none.
func (w *world) heldFor(i int, p *mpod) time.Duration {
	s := w.holds[holdKey{i, p.uid}]
	if s == nil || w.now.Sub(s.last) > HoldBreak {
		return 0
	}
	return w.now.Sub(s.since)
}

// unavailableReady is the group's unavailable pods as its PDB counts them (pkg/controller/
// disruption/disruption.go, countHealthyPods): expected less the pods Ready and not
// terminating, however recently they became Ready.
func (w *world) unavailableReady(g *mgroup) int32 {
	available := int32(0)
	for _, p := range w.pods {
		if p.g == g && p.available(w.now, 0) {
			available++
		}
	}
	return w.expected(g) - available
}

// mustRelease is E13's way out: an eviction of a Ready pod that replica i has held for
// longer than maxHold under afterMaxHold Release is admitted once the group, as its PDB
// counts it, has room for it, whatever holdfast's own holds say (unless the ledger failed
// this very request). Only where every replica sees the group as it is (stable), and no
// admitted eviction kube refused may still be counted.
func (w *world) mustRelease(i int, p *mpod, who int, code int32, dryRun, armed, deleting, wasReady bool, specs []v1alpha1.DisruptionPolicySpec, msg string) {
	if !w.releases() || deleting || armed || !wasReady || !p.g.guarded || p.terminating || !slices.Contains(w.pods, p) ||
		w.heldFor(i, p) < w.cfg.MaxHold+time.Second || len(specs) != 1 || w.expected(p.g) == 0 {
		return
	}
	if !w.stable(p.g) || w.now.Sub(w.refused) <= budget.EvictionLapse+2*budget.MaxClockSkew {
		return
	}
	if explicitZero(specs[0].MaxUnavailable) {
		return // a budget of no pod refuses; it holds nothing to release
	}
	if q := w.cfg.requesterOf(who); q != nil && explicitZero(q.max) {
		return
	}
	if w.unavailableReady(p.g)+1 > kubeBudget(specs[0].MaxUnavailable, w.expected(p.g)) {
		return
	}
	w.checked["E13"]++
	if code != http.StatusOK {
		w.violate("E13: eviction of %s by %s, held by replica %d for %s (past maxHold %s, afterMaxHold Release) while %s has %d pods unavailable as its PDB counts them and a budget of %d, answered %d: %s",
			p.name, identities[who].name, i, w.heldFor(i, p), w.cfg.MaxHold, p.g.name, w.unavailableReady(p.g), kubeBudget(specs[0].MaxUnavailable, w.expected(p.g)), code, msg)
	}
}
