package policy

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

func TestBudgetRoundsAsPDBs(t *testing.T) {
	cases := []struct {
		v        intstr.IntOrString
		expected int32
		want     int32
	}{
		{intstr.FromInt32(1), 4, 1},
		{intstr.FromString("25%"), 4, 1},
		{intstr.FromString("25%"), 5, 2}, // 1.25 rounds up
		{intstr.FromString("10%"), 3, 1},
		{intstr.FromString("0%"), 3, 0},
		{intstr.FromInt32(0), 3, 0},
		{intstr.FromString("half"), 3, 0}, // unreadable guards strictly
	}
	for _, tc := range cases {
		if got := Resolve(DisruptionBudget, v1alpha1.KindDeployment, &tc.v, tc.expected); got != tc.want {
			t.Errorf("Resolve(DisruptionBudget, %s of %d) = %d, want %d", tc.v.String(), tc.expected, got, tc.want)
		}
	}
	if Resolve(DisruptionBudget, v1alpha1.KindDeployment, nil, 9) != 1 {
		t.Error("an unset maxUnavailable is 1")
	}
}

func TestRollingUpdateFieldsRoundAsKube(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	cases := map[string]struct {
		f     Field
		kind  v1alpha1.WorkloadKind
		v     *intstr.IntOrString
		total int32
		want  int32
	}{
		"maxUnavailable rounds down":              {MaxUnavailable, v1alpha1.KindDeployment, pct("34%"), 5, 1},
		"maxUnavailable unset is 0":               {MaxUnavailable, v1alpha1.KindStatefulSet, nil, 5, 0},
		"maxUnavailable unreadable is all":        {MaxUnavailable, v1alpha1.KindDeployment, pct("most"), 5, 5},
		"maxSurge rounds up":                      {MaxSurge, v1alpha1.KindDaemonSet, pct("10%"), 5, 1},
		"maxSurge unset is 0":                     {MaxSurge, v1alpha1.KindDaemonSet, nil, 5, 0},
		"maxSurge unreadable is 0":                {MaxSurge, v1alpha1.KindDaemonSet, pct("some"), 5, 0},
		"maxUnavailable of a number is itself":    {MaxUnavailable, v1alpha1.KindDeployment, &intstr.IntOrString{IntVal: 2}, 5, 2},
		"maxUnavailable of a DaemonSet rounds up": {MaxUnavailable, v1alpha1.KindDaemonSet, pct("10%"), 5, 1},
		"maxInFlight rounds up":                   {MaxInFlight, "", pct("10%"), 11, 2},
		"maxInFlight is at least 1":               {MaxInFlight, "", pct("10%"), 0, 1},
		"maxInFlight of 0 is 1":                   {MaxInFlight, "", &intstr.IntOrString{IntVal: 0}, 5, 1},
		"maxInFlight unset is 1":                  {MaxInFlight, "", nil, 5, 1},
		"maxInFlight unreadable is 1":             {MaxInFlight, "", pct("many"), 5, 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Resolve(tc.f, tc.kind, tc.v, tc.total); got != tc.want {
				t.Errorf("Resolve = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDeploymentFencepostsAsKube(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	cases := []struct {
		surge, unavailable *intstr.IntOrString
		replicas           int32
		wantSurge, wantU   int32
	}{
		{pct("25%"), pct("25%"), 10, 3, 2}, // surge 2.5 up, unavailable 2.5 down
		{pct("25%"), pct("25%"), 1, 1, 0},
		{pct("0%"), pct("10%"), 5, 0, 1}, // both 0: one unavailable
		{nil, nil, 5, 0, 1},
	}
	for _, tc := range cases {
		if s, u := Fenceposts(tc.surge, tc.unavailable, tc.replicas); s != tc.wantSurge || u != tc.wantU {
			t.Errorf("Fenceposts(%v, %v, %d) = %d, %d; want %d, %d", tc.surge, tc.unavailable, tc.replicas, s, u, tc.wantSurge, tc.wantU)
		}
	}
}
