package policy

import (
	"reflect"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// TestParsedWindowsFollowTheirContent: the cache answers by the windows' content, so a
// change to any field a window has is parsed afresh, never answered from the windows
// before it; and the same windows answer as parsing them does.
func TestParsedWindowsFollowTheirContent(t *testing.T) {
	// Every field of a window is in the key: a new field must be added to windowsKey.
	if n := reflect.TypeFor[v1alpha1.Window]().NumField(); n != 5 {
		t.Fatalf("v1alpha1.Window has %d fields, windowsKey reads 5: add the new one to the key", n)
	}
	base := win("0 9 * * *", "2h", "Europe/Berlin", v1alpha1.WindowDeny)
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC) // 10:30 in Berlin: inside, UTC 09:00 +2h too
	edits := map[string]func(*v1alpha1.Window){
		"name":     func(w *v1alpha1.Window) { w.Name = "other" },
		"schedule": func(w *v1alpha1.Window) { w.Schedule = "0 12 * * *" },
		"duration": func(w *v1alpha1.Window) { w.Duration = metav1.Duration{Duration: 30 * time.Minute} },
		"timeZone": func(w *v1alpha1.Window) { w.TimeZone = "America/New_York" },
		"action":   func(w *v1alpha1.Window) { w.Action = v1alpha1.WindowAllow },
		"invalid":  func(w *v1alpha1.Window) { w.Schedule = "@every 2h" },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			changed := base
			edit(&changed)
			for _, ws := range [][]v1alpha1.Window{{base}, {changed}, {base}, {changed}, {base, changed}} {
				got, gotErrs := ParseWindows(ws)
				want, wantErrs := parseWindows(ws)
				if got.At(at) != want.At(at) || len(gotErrs) != len(wantErrs) {
					t.Fatalf("%+v: cached %+v (%d errors), parsed %+v (%d errors)", ws, got.At(at), len(gotErrs), want.At(at), len(wantErrs))
				}
				if st, _ := got.Status(at); st != func() string { s, _ := want.Status(at); return s }() {
					t.Fatalf("%+v: status %q from the cache", ws, st)
				}
			}
		})
	}
	// Two lists that join to the same text are told apart (lengths are in the key).
	a := v1alpha1.Window{Name: "a:b", Schedule: "0 9 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}
	b := v1alpha1.Window{Name: "a", Schedule: "b:0 9 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}
	if string(windowsKey(nil, []v1alpha1.Window{a})) == string(windowsKey(nil, []v1alpha1.Window{b})) {
		t.Fatal("two different windows share a key")
	}
}

// TestParsedWindowsErrorsAreTheCallers: a caller appending to the errors it was given
// does not change what the next caller gets.
func TestParsedWindowsErrorsAreTheCallers(t *testing.T) {
	bad := []v1alpha1.Window{win("0 9 * * *", "2h", "Mars/Olympus", v1alpha1.WindowDeny)}
	_, errs := ParseWindows(bad)
	if len(errs) != 1 {
		t.Fatalf("errors %v, want the time zone's", errs)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, errs := ParseWindows(bad)
			errs = append(errs, errs[0])
			_ = errs
		})
	}
	wg.Wait()
	if _, errs := ParseWindows(bad); len(errs) != 1 {
		t.Fatalf("errors %v after callers appended to theirs", errs)
	}
}

// BenchmarkParseWindows is what a guard pays per request of a policy with two windows.
func BenchmarkParseWindows(b *testing.B) {
	ws := []v1alpha1.Window{win("0 9 * * 1-5", "8h", "Europe/Berlin", v1alpha1.WindowDeny), win("0 22 * * *", "4h", "Europe/Berlin", v1alpha1.WindowAllow)}
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ParseWindows(ws)
		}
	})
	b.Run("parsed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			parseWindows(ws)
		}
	})
}

// TestWindowsAreParsedOncePerContent: once a list of windows has been parsed, reading it
// again (every request under the policy, until the policy's windows change) parses
// nothing: it allocates nothing, where parsing allocates.
func TestWindowsAreParsedOncePerContent(t *testing.T) {
	ws := []v1alpha1.Window{win("30 1 * * 6", "3h", "Asia/Tokyo", v1alpha1.WindowAllow), win("0 9 * * *", "2h", "Europe/Berlin", v1alpha1.WindowDeny)}
	if n := testing.AllocsPerRun(10, func() { parseWindows(ws) }); n == 0 {
		t.Fatal("parsing allocates nothing: the test cannot tell a parse from a cache hit")
	}
	ParseWindows(ws)
	if n := testing.AllocsPerRun(100, func() { ParseWindows(ws) }); n != 0 {
		t.Errorf("reading parsed windows again allocates %v times: they were parsed again", n)
	}
}
