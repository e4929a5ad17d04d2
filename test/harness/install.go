package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// WebhookConfigName names the webhook configuration installed for a local holdfast.
const WebhookConfigName = "holdfast-local"

// InstallCRDs applies every CRD in dir and waits until the API server serves them.
func InstallCRDs(ctx context.Context, c client.Client, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s: %v", dir, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("holdfast-devcluster"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}

// WebhookOptions says how the API server reaches a local holdfast.
type WebhookOptions struct {
	// Manifest is the generated configuration (config/webhook/manifests.yaml).
	Manifest string
	// BaseURL is where holdfast serves, e.g. https://127.0.0.1:9443.
	BaseURL  string
	CABundle []byte
	// Namespace is holdfast's own namespace, which its webhooks never guard.
	Namespace     string
	FailurePolicy admissionregistrationv1.FailurePolicyType
	// TimeoutSeconds, when not zero, replaces each webhook's timeoutSeconds.
	TimeoutSeconds int32
}

// InstallWebhooks applies the generated webhook configuration with each webhook's
// service reference replaced by a URL, and holdfast's own namespace excluded.
func InstallWebhooks(ctx context.Context, c client.Client, o WebhookOptions) error {
	raw, err := os.ReadFile(o.Manifest)
	if err != nil {
		return err
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(raw, vwc); err != nil {
		return fmt.Errorf("%s: %w", o.Manifest, err)
	}
	vwc.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"))
	vwc.ObjectMeta = metav1.ObjectMeta{Name: WebhookConfigName}
	for i := range vwc.Webhooks {
		w := &vwc.Webhooks[i]
		svc := w.ClientConfig.Service
		if svc == nil || svc.Path == nil {
			return fmt.Errorf("webhook %s has no service path to turn into a URL", w.Name)
		}
		url := strings.TrimSuffix(o.BaseURL, "/") + *svc.Path
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: o.CABundle}
		w.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{o.Namespace},
		}}}
		if o.FailurePolicy != "" {
			fp := o.FailurePolicy
			w.FailurePolicy = &fp
		}
		if o.TimeoutSeconds != 0 {
			w.TimeoutSeconds = &o.TimeoutSeconds
		}
	}
	if err := c.Patch(ctx, vwc, client.Apply, client.FieldOwner("holdfast-devcluster"), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying webhook configuration: %w", err)
	}
	return nil
}

// EnsureNamespace creates a namespace if it is missing.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
