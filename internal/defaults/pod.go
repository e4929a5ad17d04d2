package defaults

import (
	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// podTemplate applies what SetObjectDefaults_Deployment, _StatefulSet and _DaemonSet apply
// to spec.template (pkg/apis/apps/v1/zz_generated.defaults.go, generated alike for the
// three): core/v1's defaults for a pod spec, its volumes and its containers. A template is
// not a Pod: SetDefaults_Pod (requests from limits, enableServiceLinks, host ports, the
// probes' HTTP protocol) does not apply to it. Ephemeral containers are not defaulted:
// the API server refuses them in a template (ValidatePodTemplateSpec), so that no webhook
// is sent one.
func podTemplate(t *corev1.PodTemplateSpec) {
	s := &t.Spec
	podSpec(s)
	for i := range s.Volumes {
		volume(&s.Volumes[i])
	}
	for i := range s.InitContainers {
		container(&s.InitContainers[i])
	}
	for i := range s.Containers {
		container(&s.Containers[i])
	}
	resourceList(s.Overhead)
	if s.Resources != nil {
		resourceList(s.Resources.Limits)
		resourceList(s.Resources.Requests)
	}
}

// podSpec is SetDefaults_PodSpec (pkg/apis/core/v1/defaults.go).
func podSpec(s *corev1.PodSpec) {
	// serviceAccount is the deprecated alias of serviceAccountName, which wins.
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
}

// volume is what the generated code applies to each of spec.template.spec.volumes:
// SetDefaults_Volume, then each source's defaults (SetDefaults_*VolumeSource,
// SetDefaults_ObjectFieldSelector, SetDefaults_ServiceAccountTokenProjection,
// SetDefaults_PersistentVolumeClaimSpec, and the sources' +default markers).
func volume(v *corev1.Volume) {
	// SetDefaults_Volume: a volume without a source is an emptyDir.
	if ptr.AllPtrFieldsNil(&v.VolumeSource) {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	// SetDefaults_Volume, under ImageVolume (GA and locked on since 1.36).
	if v.Image != nil && v.Image.PullPolicy == "" {
		v.Image.PullPolicy = pullPolicy(v.Image.Reference)
	}
	if hp := v.HostPath; hp != nil && hp.Type == nil {
		hp.Type = ptr.To(corev1.HostPathUnset)
	}
	if sec := v.Secret; sec != nil && sec.DefaultMode == nil {
		sec.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
	}
	if is := v.ISCSI; is != nil && is.ISCSIInterface == "" {
		is.ISCSIInterface = "default"
	}
	if rbd := v.RBD; rbd != nil {
		if rbd.RBDPool == "" {
			rbd.RBDPool = "rbd"
		}
		if rbd.RadosUser == "" {
			rbd.RadosUser = "admin"
		}
		if rbd.Keyring == "" {
			rbd.Keyring = "/etc/ceph/keyring"
		}
	}
	if d := v.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = ptr.To(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		downwardAPIItems(d.Items)
	}
	if cm := v.ConfigMap; cm != nil && cm.DefaultMode == nil {
		cm.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if az := v.AzureDisk; az != nil {
		if az.CachingMode == nil {
			az.CachingMode = ptr.To(corev1.AzureDataDiskCachingReadWrite)
		}
		if az.FSType == nil {
			az.FSType = ptr.To("ext4")
		}
		if az.ReadOnly == nil {
			az.ReadOnly = ptr.To(false)
		}
		if az.Kind == nil {
			az.Kind = ptr.To(corev1.AzureSharedBlobDisk)
		}
	}
	if p := v.Projected; p != nil {
		if p.DefaultMode == nil {
			p.DefaultMode = ptr.To(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range p.Sources {
			src := &p.Sources[i]
			if src.DownwardAPI != nil {
				downwardAPIItems(src.DownwardAPI.Items)
			}
			// SetDefaults_ServiceAccountTokenProjection: an hour.
			if tok := src.ServiceAccountToken; tok != nil && tok.ExpirationSeconds == nil {
				tok.ExpirationSeconds = ptr.To[int64](3600)
			}
		}
	}
	if sio := v.ScaleIO; sio != nil {
		if sio.StorageMode == "" {
			sio.StorageMode = "ThinProvisioned"
		}
		if sio.FSType == "" {
			sio.FSType = "xfs"
		}
	}
	if e := v.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		claimSpec(&e.VolumeClaimTemplate.Spec)
	}
}

// downwardAPIItems applies SetDefaults_ObjectFieldSelector to the items' fieldRefs.
func downwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		fieldRef(items[i].FieldRef)
	}
}

// fieldRef is SetDefaults_ObjectFieldSelector.
func fieldRef(f *corev1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// claimSpec is SetDefaults_PersistentVolumeClaimSpec with its resources' SetDefaults_ResourceList.
func claimSpec(s *corev1.PersistentVolumeClaimSpec) {
	if s.VolumeMode == nil {
		s.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
	resourceList(s.Resources.Limits)
	resourceList(s.Resources.Requests)
}

// container is what the generated code applies to each init and regular container:
// SetDefaults_Container, the ports' protocol (a +default marker), the env's
// SetDefaults_ObjectFieldSelector and fileKeyRef.optional (a +default marker; EnvFiles is
// beta, on by default since 1.35), the resources' SetDefaults_ResourceList, the probes'
// SetDefaults_Probe and SetDefaults_HTTPGetAction and grpc.service (a +default marker), and
// the lifecycle handlers' SetDefaults_HTTPGetAction.
func container(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil {
			fieldRef(from.FieldRef)
			if from.FileKeyRef != nil && from.FileKeyRef.Optional == nil {
				from.FileKeyRef.Optional = ptr.To(false)
			}
		}
	}
	resourceList(c.Resources.Limits)
	resourceList(c.Resources.Requests)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		probe(p)
	}
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			httpGet(l.PostStart.HTTPGet)
		}
		if l.PreStop != nil {
			httpGet(l.PreStop.HTTPGet)
		}
	}
}

// pullPolicy is SetDefaults_Container's imagePullPolicy: Always for the tag latest, which
// an image without a tag or digest has, IfNotPresent otherwise, and for an image that does
// not parse (ParseImageName, pkg/util/parsers/parsers.go, whose error it ignores).
func pullPolicy(image string) corev1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	tagged, hasTag := named.(reference.Tagged)
	_, hasDigest := named.(reference.Digested)
	if (hasTag && tagged.Tag() == "latest") || (!hasTag && !hasDigest) {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// probe is SetDefaults_Probe, with its handler's defaults.
func probe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	httpGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr.To("")
	}
}

// httpGet is SetDefaults_HTTPGetAction.
func httpGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// resourceList is SetDefaults_ResourceList: quantities rounded up to milli-units.
func resourceList(l corev1.ResourceList) {
	for name, q := range l {
		q.RoundUp(-3)
		l[name] = q
	}
}
