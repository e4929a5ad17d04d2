package harness

import (
	"context"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// WebhookConfigName names the webhook configuration installed for a local holdfast.
const WebhookConfigName = "holdfast-local"

// WebhookOptions says how the API server reaches a local holdfast.
type WebhookOptions struct {
	// Manifest is the generated configuration (config/webhook/manifests.yaml).
	Manifest string
	// Port is where the API server calls holdfast on 127.0.0.1: a replica's webhook port,
	// or the balancer's in front of them.
	Port int
	// CA, when set, signs a serving certificate the caller writes itself. When nil, envtest
	// writes one for 127.0.0.1 and localhost into LocalServingCertDir, trusted by
	// LocalServingCAData.
	CA []byte
	// Namespace is holdfast's own namespace, which its webhooks never guard.
	Namespace     string
	FailurePolicy admissionregistrationv1.FailurePolicyType
	// TimeoutSeconds, when not zero, replaces each webhook's timeoutSeconds.
	TimeoutSeconds int32
}

// Webhooks returns envtest's options for the generated webhook configuration, named
// WebhookConfigName, each webhook's service replaced by its path at 127.0.0.1:Port
// (envtest's ModifyWebhookDefinitions) and holdfast's own namespace excluded. Install
// writes it to a cluster and waits until the API server serves it.
func Webhooks(o WebhookOptions) (*envtest.WebhookInstallOptions, error) {
	w := &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1", LocalServingPort: o.Port}
	if o.CA == nil {
		w.Paths = []string{o.Manifest}
		if err := w.PrepWithoutInstalling(); err != nil {
			return nil, err
		}
	} else {
		// Given a CA, envtest neither writes a certificate nor reads Paths: the manifest is
		// read here.
		raw, err := os.ReadFile(o.Manifest)
		if err != nil {
			return nil, err
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := yaml.UnmarshalStrict(raw, vwc); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Manifest, err)
		}
		w.ValidatingWebhooks, w.LocalServingCAData = []*admissionregistrationv1.ValidatingWebhookConfiguration{vwc}, o.CA
		if err := w.ModifyWebhookDefinitions(); err != nil {
			return nil, err
		}
	}
	if len(w.ValidatingWebhooks) != 1 {
		return nil, fmt.Errorf("%s holds %d validating webhook configurations, not one", o.Manifest, len(w.ValidatingWebhooks))
	}
	vwc := w.ValidatingWebhooks[0]
	vwc.Name = WebhookConfigName
	for i := range vwc.Webhooks {
		wh := &vwc.Webhooks[i]
		wh.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{o.Namespace},
		}}}
		if o.FailurePolicy != "" {
			fp := o.FailurePolicy
			wh.FailurePolicy = &fp
		}
		if o.TimeoutSeconds != 0 {
			wh.TimeoutSeconds = &o.TimeoutSeconds
		}
	}
	return w, nil
}

// EnsureNamespace creates a namespace if it is missing.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
