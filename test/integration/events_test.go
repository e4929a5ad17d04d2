//go:build integration

package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8sevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
)

// TestNodeEventsNameEachPod: a node's Warning Events about two of its pods, recorded through
// kube's own events broadcaster, keep both pods' notes. Without the related pod the
// broadcaster folds the second into the first's series and its note is lost, which is
// what WarnRelated exists for.
func TestNodeEventsNameEachPod(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(restConfig)
	b := k8sevents.NewBroadcaster(&k8sevents.EventSinkImpl{Interface: cs.EventsV1()})
	b.StartRecordingToSink(ctx.Done())
	defer b.Shutdown()
	l := &events.Limiter{Recorder: b.NewRecorder(informer.NewScheme(), "holdfast-test")}
	ns := createNamespace(t, nil)
	node := func(name string) *corev1.Node {
		return &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + name)}}
	}
	related, plain := "related-"+ns, "plain-"+ns
	now := time.Now()
	for _, p := range []string{"a", "b"} {
		l.WarnRelated(node(related), pod(p), "held/"+p, now, "EvictionHeldTooLong", "held "+ns+"/"+p)
		l.Warn(node(plain), "held/"+p, now, "EvictionHeldTooLong", "held "+ns+"/"+p)
	}
	notes := func(nodeName string) []string {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == nodeName && strings.Contains(e.Note, ns) {
				out = append(out, e.Note)
			}
		}
		slices.Sort(out)
		return out
	}
	want := []string{"held " + ns + "/a", "held " + ns + "/b"}
	waitFor(t, 10*time.Second, "both pods' Events on the node", func() bool { return slices.Equal(notes(related), want) })
	// kube's folding, which the related pod keeps apart: give the second a moment to land.
	time.Sleep(time.Second)
	if got := notes(plain); len(got) != 1 {
		t.Errorf("without the related pod, the node's Events read %q: want kube to fold the second into the first (WarnRelated's reason)", got)
	}
}
