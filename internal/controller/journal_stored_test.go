package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

// TestRecorderMapsThePreviousReleasesJournal: a journal release 5648181 wrote is mapped to
// its workload, so that a journal edited or deleted by hand is rebuilt.
func TestRecorderMapsThePreviousReleasesJournal(t *testing.T) {
	cm := &corev1.ConfigMap{}
	golden.Load(t, "../journal/testdata/previous/journal-configmap.json", cm)
	r := &JournalRecorder{Kind: v1alpha1.KindDeployment, Namespace: "holdfast-system"}
	if got := r.journaled(context.Background(), cm); !cmp.Equal(got, []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "tenant-a", Name: "kube-apiserver"}}}) {
		t.Errorf("the recorder maps the journal to %v", got)
	}
}
