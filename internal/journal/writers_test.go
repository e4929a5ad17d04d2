package journal

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// written is a journal of tenant-a/kube-apiserver whose revisions became current at the
// given minutes after t0, written by the given field managers ("" unknown).
func writtenJournal(minutes []int, writers []string) *Journal {
	j := &Journal{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "kube-apiserver", UID: "u1"}
	for i, m := range minutes {
		since := t0.Add(time.Duration(m) * time.Minute)
		if i > 0 {
			j.Revisions[i-1].Until = at(since)
		}
		j.Revisions = append(j.Revisions, Revision{Template: strings.Repeat(string(rune('a'+i%6)), 64), Since: since, Progressed: since, Writer: writers[i]})
	}
	return j
}

// TestFight: two consecutive template changes within the window by different writers
// are a fight; the journal's first revision is no change, an unknown writer pairs with
// none, and a change older than the window is forgotten.
func TestFight(t *testing.T) {
	window := 10 * time.Minute
	for _, tc := range []struct {
		name    string
		minutes []int
		writers []string
		now     int
		want    *Fight
	}{
		{name: "created by one, changed by another: one change, no fight", minutes: []int{0, 1}, writers: []string{"operator-a", "gitops-b"}, now: 2},
		{name: "A to B by X, B to A by Y", minutes: []int{-60, 1, 2}, writers: []string{"operator-a", "operator-a", "gitops-b"}, now: 3,
			want: &Fight{First: "operator-a", Second: "gitops-b", At: t0.Add(2 * time.Minute), Until: t0.Add(11 * time.Minute)}},
		{name: "X, Y, X: the newest pair", minutes: []int{-60, 1, 2, 3}, writers: []string{"operator-a", "operator-a", "gitops-b", "operator-a"}, now: 4,
			want: &Fight{First: "gitops-b", Second: "operator-a", At: t0.Add(3 * time.Minute), Until: t0.Add(12 * time.Minute)}},
		{name: "one writer changing twice", minutes: []int{-60, 1, 2}, writers: []string{"gitops-b", "operator-a", "operator-a"}, now: 3},
		{name: "an unknown writer pairs with none", minutes: []int{-60, 1, 2}, writers: []string{"operator-a", "", "gitops-b"}, now: 3},
		{name: "the first change left the window", minutes: []int{-60, 1, 20}, writers: []string{"operator-a", "operator-a", "gitops-b"}, now: 21},
		{name: "the pair ages out", minutes: []int{-60, 1, 2}, writers: []string{"operator-a", "operator-a", "gitops-b"}, now: 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := writtenJournal(tc.minutes, tc.writers)
			f, ok := j.Fight(window, t0.Add(time.Duration(tc.now)*time.Minute))
			if ok != (tc.want != nil) {
				t.Fatalf("Fight = %+v, %t; want %+v", f, ok, tc.want)
			}
			if tc.want != nil {
				if diff := cmp.Diff(*tc.want, f); diff != "" {
					t.Errorf("Fight (-want +got):\n%s", diff)
				}
			}
		})
	}
	if _, ok := writtenJournal([]int{-60, 1, 2}, []string{"a", "a", "b"}).Fight(0, t0.Add(3*time.Minute)); ok {
		t.Error("a policy without a revertWindow found a fight")
	}
}

// TestAttribute: the writer is given to a revision that became current since the previous
// journal, never to one that was already current (a scale, a status change) nor over a
// writer recorded before.
func TestAttribute(t *testing.T) {
	prev := writtenJournal([]int{0}, []string{"operator-a"})
	same := writtenJournal([]int{0}, []string{"operator-a"})
	same.Attribute(prev, "gitops-b")
	if w := same.Current().Writer; w != "operator-a" {
		t.Errorf("an unchanged revision took writer %q", w)
	}
	next := writtenJournal([]int{0, 1}, []string{"operator-a", ""})
	next.Attribute(prev, "gitops-b")
	if w := next.Current().Writer; w != "gitops-b" {
		t.Errorf("a new revision has writer %q, want gitops-b", w)
	}
	rebuilt := writtenJournal([]int{0}, []string{""})
	rebuilt.Attribute(nil, "operator-a")
	if w := rebuilt.Current().Writer; w != "operator-a" {
		t.Errorf("a journal built anew has writer %q, want operator-a", w)
	}
}

// TestWritersKeptApart: the writers are kept under their own key, so that the journal's
// own JSON is what the previous release reads (it refuses fields it does not know); they
// decode back to their revisions, entries of revisions the journal no longer has are
// dropped, and a writer the API server could not have named makes the journal invalid.
func TestWritersKeptApart(t *testing.T) {
	j := writtenJournal([]int{0, 1, 2}, []string{"operator-a", "", "gitops-b"})
	cm, err := Encode(j, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cm.Data[dataKey], "writer") || !strings.Contains(cm.Data[writersKey], "gitops-b") {
		t.Fatalf("data %v: writers must be under %q only", cm.Data, writersKey)
	}
	back, err := Decode(cm)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(j, back); diff != "" {
		t.Errorf("decoded (-encoded +decoded):\n%s", diff)
	}

	// The previous release rewrites the journal without the key: it reads as no writers.
	delete(cm.Data, writersKey)
	if back, err = Decode(cm); err != nil || back.Current().Writer != "" {
		t.Errorf("without %q: %v, writer %q", writersKey, err, back.Current().Writer)
	}

	// An entry for a revision trimmed away lends its writer to no other revision.
	cm.Data[writersKey] = `[{"template":"` + strings.Repeat("f", 64) + `","since":"2026-12-01T12:00:00Z","writer":"ghost"}]`
	if back, err = Decode(cm); err != nil {
		t.Fatal(err)
	}
	for _, r := range back.Revisions {
		if r.Writer != "" {
			t.Errorf("revision %s took writer %q from an entry of another revision", r.Template[:8], r.Writer)
		}
	}
	for _, bad := range []string{`{}`, `[{"template":"x","since":"2026-12-01T12:00:00Z","writer":""}]`,
		`[{"template":"x","since":"2026-12-01T12:00:00Z","writer":"` + strings.Repeat("m", 129) + `"}]`,
		`[{"template":"x","since":"2026-12-01T12:00:00Z","writer":"a","user":"b"}]`} {
		cm.Data[writersKey] = bad
		if _, err := Decode(cm); err == nil {
			t.Errorf("writers %s decoded", bad)
		}
	}
}
