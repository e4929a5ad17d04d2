package policy

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// Windows are a policy's windows, parsed: what they say at a time.
type Windows struct {
	windows []window
	allows  bool // some window is an Allow window
}

type window struct {
	name     string
	schedule cron.Schedule
	duration time.Duration
	action   v1alpha1.WindowAction
}

// maxPeriod bounds how far back an open window is looked for: no window lasts longer.
const maxPeriod = 31 * 24 * time.Hour

// windowsPath is where a policy keeps its windows, in both kinds.
var windowsPath = field.NewPath("spec", "windows")

// ParseWindows parses windows, keeping those holdfast can evaluate; errs names the field
// of each it cannot (ValidateWindows). A stored policy's window that cannot be evaluated is
// ignored rather than held to: the policy webhook refuses such windows, so one is stored
// only while holdfast was down, and a window that holds everything until someone notices
// is a cluster-wide outage, not a guard. Its policy's status says so (Ready=False).
//
// Parsing loads time zones and walks cron schedules, so the result is kept per distinct
// list of windows (parsedWindows): the guards ask on every request of a policy with
// windows, and a policy's windows change only with its spec.
func ParseWindows(ws []v1alpha1.Window) (Windows, field.ErrorList) {
	if len(ws) == 0 {
		return Windows{}, nil
	}
	return parsed.get(ws)
}

// parseWindows is ParseWindows without the cache.
func parseWindows(ws []v1alpha1.Window) (out Windows, errs field.ErrorList) {
	for i, w := range ws {
		pw, werrs := parseWindow(w, windowsPath.Index(i))
		if len(werrs) > 0 {
			errs = append(errs, werrs...)
			continue
		}
		out.windows = append(out.windows, pw)
		out.allows = out.allows || w.Action == v1alpha1.WindowAllow
	}
	return out, errs
}

// ValidateWindows is every error of the windows holdfast cannot evaluate: a cron
// expression that does not parse or never opens (an interval such as "@every 2h", a date
// that does not exist), an unknown time zone, a duration that is not positive or is longer
// than the time between two openings.
func ValidateWindows(ws []v1alpha1.Window) field.ErrorList {
	_, errs := ParseWindows(ws)
	return errs
}

// parseWindow parses one window, at is its field.
func parseWindow(w v1alpha1.Window, at *field.Path) (window, field.ErrorList) {
	var errs field.ErrorList
	loc := time.UTC
	if w.TimeZone != "" {
		var err error
		if loc, err = time.LoadLocation(w.TimeZone); err != nil {
			errs = append(errs, field.Invalid(at.Child("timeZone"), w.TimeZone, "unknown time zone: want an IANA name such as Europe/Berlin"))
			loc = time.UTC
		}
	}
	sched, err := cron.ParseStandard(w.Schedule)
	if err != nil {
		// The duration can only be checked against a schedule that parses.
		return window{}, append(errs, field.Invalid(at.Child("schedule"), w.Schedule, err.Error()+": want a five-field cron expression such as \"0 9 * * 1-5\""))
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		// "@every 2h" counts from whenever it is asked: asked at any instant, its next
		// opening is two hours on, so it is never open.
		return window{}, append(errs, field.Invalid(at.Child("schedule"), w.Schedule,
			"an interval has no fixed times and never opens: want a five-field cron expression such as \"0 */2 * * *\" or a descriptor such as @daily"))
	}
	spec.Location = loc
	if ref := time.Date(2026, 1, 1, 0, 0, 0, 0, loc); sched.Next(ref).IsZero() {
		// The cron library looks five years ahead: "0 0 31 4 *" (April 31) never comes.
		return window{}, append(errs, field.Invalid(at.Child("schedule"), w.Schedule,
			"never fires (no such date): want a schedule that opens"))
	}
	d := w.Duration.Duration
	if d <= 0 || d > maxPeriod {
		return window{}, append(errs, field.Invalid(at.Child("duration"), d.String(), fmt.Sprintf("must be positive and at most %s", maxPeriod)))
	}
	// A window longer than the time between two of its openings never closes.
	ref := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
	for range 8 {
		first := sched.Next(ref)
		if second := sched.Next(first); !second.IsZero() && second.Sub(first) < d {
			return window{}, append(errs, field.Invalid(at.Child("duration"), d.String(),
				fmt.Sprintf("is longer than the %s between two openings of %q", second.Sub(first), w.Schedule)))
		}
		ref = first
	}
	if len(errs) > 0 {
		return window{}, errs
	}
	name := w.Name
	if name == "" {
		name = w.Schedule
	}
	return window{name: name, schedule: sched, duration: d, action: w.Action}, nil
}

// Hold is what the windows say at a time: whether changes are held, by which window
// (empty: by being outside every Allow window), and until when.
type Hold struct {
	Held   bool
	Window string
	Until  time.Time
}

// open returns when the window's opening that is open at now ends, if one is.
func (w window) open(now time.Time) (time.Time, bool) {
	// The latest opening at or before now, if within the window's duration.
	start := w.schedule.Next(now.Add(-w.duration).Add(-time.Second))
	if start.IsZero() || start.After(now) {
		return time.Time{}, false
	}
	end := start.Add(w.duration)
	for { // openings that overlap extend it
		next := w.schedule.Next(start)
		if next.IsZero() || !next.Before(end) {
			break
		}
		start, end = next, next.Add(w.duration)
	}
	return end, now.Before(end)
}

// At says whether changes are held at now: by an open Deny window (until it closes, or
// until the last overlapping one does), or, when there are Allow windows, by none of them
// being open (until the next opens).
func (ws Windows) At(now time.Time) Hold {
	var h Hold
	allowed := false
	for _, w := range ws.windows {
		end, open := w.open(now)
		switch {
		case open && w.action == v1alpha1.WindowDeny && end.After(h.Until):
			h = Hold{Held: true, Window: w.name, Until: end}
		case open && w.action == v1alpha1.WindowAllow:
			allowed = true
		}
	}
	if h.Held || !ws.allows || allowed {
		return h
	}
	h = Hold{Held: true, Window: "outside Allow windows"}
	for _, w := range ws.windows {
		if w.action == v1alpha1.WindowAllow {
			if next := w.schedule.Next(now); h.Until.IsZero() || next.Before(h.Until) {
				h.Until = next
			}
		}
	}
	return h
}

// Status is what the windows say at now for a policy's status: the window in force (an
// open Deny or Allow window, or "outside Allow windows") and when that next changes.
func (ws Windows) Status(now time.Time) (active string, next time.Time) {
	h := ws.At(now)
	if h.Held {
		return h.Window, h.Until
	}
	for _, w := range ws.windows {
		if end, open := w.open(now); open {
			active = w.name
			if next.IsZero() || end.Before(next) {
				next = end
			}
		}
	}
	for _, w := range ws.windows {
		if w.action == v1alpha1.WindowDeny {
			if n := w.schedule.Next(now); next.IsZero() || n.Before(next) {
				next = n
			}
		}
	}
	return active, next
}
