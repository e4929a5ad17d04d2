package journal

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

// The journal in testdata/previous/ is that of tenant-a/kube-apiserver as release 5648181
// wrote it: v1.31.4 finished at t0-2h, v1.32.0 rolling out since t0-10m.
var prevT0 = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)

var konnectivityServerCount = []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}

// kas is the Deployment tenant-a/kube-apiserver the journal in testdata/previous/ is of.
func kas(t *testing.T, image, serverCount string) *workload.Workload {
	t.Helper()
	labels := map[string]string{"app": "kube-apiserver"}
	w, err := workload.From(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "kube-apiserver", UID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", Generation: 7, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:" + image},
				{Name: "konnectivity-server", Image: "registry.k8s.io/kas-network-proxy/proxy-server:v0.31.0", Args: []string{"--server-count=" + serverCount}},
			}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 7, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestJournalStoredForm pins a journal's ConfigMap as the recorder writes it (Encode): its
// name, labels, data keys and the JSON of the journal, every field set.
func TestJournalStoredForm(t *testing.T) {
	j := &Journal{Kind: v1alpha1.KindStatefulSet, Namespace: "tenant-a", Name: "etcd", UID: "0d1e2f30-4152-4637-8849-5a6b7c8d9e0f", Generation: 12,
		Held: true, Deleted: at(t0.Add(3 * time.Hour)),
		Revisions: []Revision{
			{Template: strings.Repeat("1", 64), Shape: strings.Repeat("2", 64), Since: t0, Until: at(t0.Add(time.Hour)), Finished: at(t0.Add(5 * time.Minute)),
				Available: 3, Progressed: t0.Add(4 * time.Minute), Pending: true, Lagging: true, Writer: "operator-a"},
			{Template: strings.Repeat("3", 64), Since: t0.Add(time.Hour), Available: 1, Progressed: t0.Add(61 * time.Minute), Writer: "gitops-b"},
		},
		Observed: &Observed{Revision: 7, Template: strings.Repeat("3", 64), Updated: 1}}
	cm, err := Encode(j, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	golden.AssertJSON(t, "testdata/journal-configmap.golden", cm)
}

// TestJournalNames pins the name of each kind's journal ConfigMap: the recorder and every
// replica find a workload's journal by its name.
func TestJournalNames(t *testing.T) {
	var b strings.Builder
	for _, k := range workload.Kinds() {
		fmt.Fprintf(&b, "%s tenant-a/kube-apiserver\t%s\n", k, Name(k, "tenant-a", "kube-apiserver"))
	}
	golden.Assert(t, "testdata/journal-names.golden", []byte(b.String()))
}

// TestReadsThePreviousReleasesJournal: a journal release 5648181 wrote decodes as it was
// written, the store serves it, the recorder maps it to its workload, and its fingerprints
// are this release's fingerprints of the same templates, so that its revisions are the
// workload's (the current one rolling out, a scale of it the same revision, the previous
// one left when the current one came).
//
// There is no newer release's journal here: Decode refuses a field it does not know
// (TestDecodeRefusesWhatHoldfastDidNotWrite), so a journal written with an added field
// reads as absent to this release; a change to the journal's JSON takes a migration, or a
// key of its own as Observed has (TestReadsThePreviousReleasesDaemonSetJournal).
func TestReadsThePreviousReleasesJournal(t *testing.T) {
	cm := &corev1.ConfigMap{}
	golden.Load(t, "testdata/previous/journal-configmap.json", cm)
	v131, v132 := kas(t, "v1.31.4", "3"), kas(t, "v1.32.0", "3")
	want := &Journal{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "kube-apiserver", UID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", Generation: 7,
		Revisions: []Revision{
			{Template: "347caa5010ebc8f2af7a7bb3565f2e108fa28d890464845e454973a8da322617", Shape: "6fc8e36fd7b5b772069b43b72234751b638d5e8487e1fa12b574e02f68affed6",
				Since: prevT0.Add(-2 * time.Hour), Until: at(prevT0.Add(-10 * time.Minute)), Finished: at(prevT0.Add(-2 * time.Hour)), Progressed: prevT0.Add(-2 * time.Hour)},
			{Template: "f5fb2199ae58b4b88ece56c05eb470b9fcd95b2134779f82e51b72f145d43e86", Shape: "800009c34081e0dd0c0084e049278cc958f83b030acfe0b9c55b6ae0af130d83",
				Since: prevT0.Add(-10 * time.Minute), Progressed: prevT0.Add(-10 * time.Minute)},
		}}
	j, err := Decode(cm)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Errorf("journal (-written +read):\n%s", diff)
	}

	s := &Store{}
	s.Handler().OnAdd(cm, true)
	if s.Get(v1alpha1.KindDeployment, "tenant-a", "kube-apiserver") == nil {
		t.Error("the store does not serve the journal")
	}

	if cur := j.Rolling(); cur == nil || !Matches(cur, v132.Template, konnectivityServerCount) {
		t.Error("v1.32.0 is not the revision rolling out: this release fingerprints its template otherwise")
	}
	if !Matches(j.Current(), kas(t, "v1.32.0", "4").Template, konnectivityServerCount) {
		t.Error("a scale of v1.32.0 is not its revision: this release fingerprints its shape otherwise")
	}
	tl := Timeline{Revisions: j.Revisions}
	sum, _ := v131.Template.Sum()
	if left, ok := tl.LeftAt(sum, ""); !ok || !left.Equal(prevT0.Add(-10*time.Minute)) {
		t.Errorf("LeftAt(v1.31.4) = %v, %t; want when v1.32.0 came", left, ok)
	}
}
