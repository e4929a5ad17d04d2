package harness

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// WriteAdminKubeconfig adds a user in system:masters to env's API server and writes its
// kubeconfig to path, for a holdfast process the harnesses start. server, when not empty,
// replaces the API server's address (a proxy in front of it).
func WriteAdminKubeconfig(env *envtest.Environment, cfg *rest.Config, user, server, path string) error {
	u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return err
	}
	raw, err := u.KubeConfig()
	if err != nil {
		return err
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return err
	}
	if server != "" {
		for _, cl := range kc.Clusters {
			cl.Server = server
		}
	}
	return clientcmd.WriteToFile(*kc, path)
}
