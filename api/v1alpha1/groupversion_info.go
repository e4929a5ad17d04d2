// Package v1alpha1 holds holdfast's policy types, API group holdfast.dev.
// +kubebuilder:object:generate=true
// +groupName=holdfast.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of holdfast's policies.
	GroupVersion = schema.GroupVersion{Group: "holdfast.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the policy types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the policy types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
