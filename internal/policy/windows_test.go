package policy

import (
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

func win(schedule, d, tz string, action v1alpha1.WindowAction) v1alpha1.Window {
	dur, err := time.ParseDuration(d)
	if err != nil {
		panic(err)
	}
	return v1alpha1.Window{Name: schedule, Schedule: schedule, Duration: metav1.Duration{Duration: dur}, TimeZone: tz, Action: action}
}

func TestWindowsAt(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(loc *time.Location, y int, m time.Month, d, h, min int) time.Time {
		return time.Date(y, m, d, h, min, 0, 0, loc)
	}
	freeze := win("0 9 * * 1-5", "8h", "Europe/Berlin", v1alpha1.WindowDeny) // business hours
	night := win("0 22 * * *", "4h", "Europe/Berlin", v1alpha1.WindowAllow)  // 22:00–02:00
	cases := []struct {
		name      string
		windows   []v1alpha1.Window
		now       time.Time
		held      bool
		until     time.Time
		heldBy    string
		wantError string
	}{
		{name: "inside business hours", windows: []v1alpha1.Window{freeze}, now: at(berlin, 2026, 12, 1, 10, 0), held: true,
			until: at(berlin, 2026, 12, 1, 17, 0), heldBy: freeze.Name},
		{name: "after business hours", windows: []v1alpha1.Window{freeze}, now: at(berlin, 2026, 12, 1, 17, 0)},
		{name: "on a Saturday", windows: []v1alpha1.Window{freeze}, now: at(berlin, 2026, 12, 5, 10, 0)},
		{name: "the zone, not UTC: 08:30 UTC is 09:30 in Berlin", windows: []v1alpha1.Window{freeze}, now: at(time.UTC, 2026, 12, 1, 8, 30), held: true,
			until: at(berlin, 2026, 12, 1, 17, 0), heldBy: freeze.Name},
		// Spring forward: 2026-03-29 02:00 → 03:00 in Berlin; 01:00 CET is 00:00 UTC, 3 h to 03:00 UTC.
		{name: "the day clocks go forward", windows: []v1alpha1.Window{win("0 1 * * *", "3h", "Europe/Berlin", v1alpha1.WindowDeny)},
			now: at(berlin, 2026, 3, 29, 3, 30), held: true, until: at(time.UTC, 2026, 3, 29, 3, 0), heldBy: "0 1 * * *"},
		{name: "the day clocks go back", windows: []v1alpha1.Window{win("0 1 * * *", "3h", "Europe/Berlin", v1alpha1.WindowDeny)},
			// 01:00 CEST is 23:00 UTC; a duration is elapsed time, 3 h to 02:00 UTC (03:00 CET).
			now: at(time.UTC, 2026, 10, 25, 1, 30), held: true, until: at(time.UTC, 2026, 10, 25, 2, 0), heldBy: "0 1 * * *"},
		{name: "outside every Allow window", windows: []v1alpha1.Window{night}, now: at(berlin, 2026, 12, 1, 12, 0), held: true,
			until: at(berlin, 2026, 12, 1, 22, 0), heldBy: "outside Allow windows"},
		{name: "inside an Allow window, past midnight", windows: []v1alpha1.Window{night}, now: at(berlin, 2026, 12, 2, 1, 0)},
		{name: "a Deny window inside an Allow one holds", windows: []v1alpha1.Window{night, win("30 23 * * *", "1h", "Europe/Berlin", v1alpha1.WindowDeny)},
			now: at(berlin, 2026, 12, 1, 23, 45), held: true, until: at(berlin, 2026, 12, 2, 0, 30), heldBy: "30 23 * * *"},
		{name: "an unknown zone", windows: []v1alpha1.Window{win("0 9 * * *", "1h", "Mars/Olympus", v1alpha1.WindowDeny)}, wantError: "spec.windows[0].timeZone"},
		{name: "a schedule that does not parse", windows: []v1alpha1.Window{win("0 25 * * *", "1h", "", v1alpha1.WindowDeny)}, wantError: "spec.windows[0].schedule"},
		{name: "an interval never opens", windows: []v1alpha1.Window{win("@every 2h", "1h", "", v1alpha1.WindowAllow)}, wantError: "spec.windows[0].schedule"},
		{name: "a date that never comes", windows: []v1alpha1.Window{win("0 0 31 4 *", "1h", "", v1alpha1.WindowDeny)}, wantError: "spec.windows[0].schedule"},
		{name: "a descriptor with fixed times opens", windows: []v1alpha1.Window{win("@daily", "1h", "", v1alpha1.WindowDeny)},
			now: at(time.UTC, 2026, 12, 1, 0, 30), held: true, until: at(time.UTC, 2026, 12, 1, 1, 0), heldBy: "@daily"},
		{name: "longer than its period", windows: []v1alpha1.Window{win("0 * * * *", "2h", "", v1alpha1.WindowDeny)}, wantError: "spec.windows[0].duration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws, errs := ParseWindows(c.windows)
			if c.wantError != "" {
				if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), c.wantError) {
					t.Fatalf("ParseWindows = %v, want an error naming %s", errs, c.wantError)
				}
				if h := ws.At(c.now); h.Held {
					t.Fatalf("a window that cannot be evaluated holds: %+v; it must be ignored", h)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			h := ws.At(c.now)
			if h.Held != c.held || (c.held && (!h.Until.Equal(c.until) || h.Window != c.heldBy)) {
				t.Fatalf("At(%s) = %+v, want held=%t until %s by %q", c.now, h, c.held, c.until, c.heldBy)
			}
		})
	}
}

func TestTemporaryExemptionsExpire(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	e := v1alpha1.Exemptions{Temporary: []v1alpha1.TemporaryExemption{
		{Users: []string{"oncall"}, Expires: metav1.NewTime(now.Add(30 * time.Minute)), Reason: "INC-42"},
		{Users: []string{"former"}, Expires: metav1.NewTime(now.Add(-time.Minute)), Reason: "CHG-7"},
	}}
	if ok, g := ExemptAt(e, user("oncall"), now); !ok || g == nil || g.Reason != "INC-42" {
		t.Errorf("the on-call engineer within the half hour: %t %+v", ok, g)
	}
	if ok, _ := ExemptAt(e, user("oncall"), now.Add(31*time.Minute)); ok {
		t.Error("an expired exemption still applies")
	}
	if ok, _ := ExemptAt(e, user("former"), now); ok {
		t.Error("an expired exemption still applies")
	}
	if got := Expired(e, now); len(got) != 1 || got[0] != "CHG-7" {
		t.Errorf("Expired = %v", got)
	}
}

func user(name string) authenticationv1.UserInfo { return authenticationv1.UserInfo{Username: name} }

func TestRequesterFor(t *testing.T) {
	rs := []v1alpha1.Requester{
		{ServiceAccounts: []string{"kube-system/cluster-autoscaler"}},
		{Groups: []string{"sre"}},
	}
	if r := RequesterFor(rs, user("system:serviceaccount:kube-system:cluster-autoscaler")); r != &rs[0] {
		t.Errorf("the autoscaler: %v", r)
	}
	if r := RequesterFor(rs, authenticationv1.UserInfo{Username: "alice", Groups: []string{"sre"}}); r != &rs[1] {
		t.Errorf("a human in sre: %v", r)
	}
	if r := RequesterFor(rs, user("bob")); r != nil {
		t.Errorf("anyone else: %v", r)
	}
}
