package deploy_test

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/onetick/onetick/config"
)

// TestKubernetesListenerHasAToken: the shipped Kubernetes example listens
// on the pod IP with a token that comes from a Secret (never written in a
// manifest), so it is not an open listener; its configuration is valid
// and draws no warning.
func TestKubernetesListenerHasAToken(t *testing.T) {
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	read(t, "kubernetes/configmap.yaml", &cm)
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string   `yaml:"name"`
						Args []string `yaml:"args"`
						Env  []struct {
							Name      string `yaml:"name"`
							Value     *string
							ValueFrom *struct {
								SecretKeyRef *struct {
									Name     string `yaml:"name"`
									Key      string `yaml:"key"`
									Optional bool   `yaml:"optional"`
								} `yaml:"secretKeyRef"`
							} `yaml:"valueFrom"`
						} `yaml:"env"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	read(t, "kubernetes/deployment.yaml", &dep)
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("containers: %+v", dep.Spec.Template.Spec.Containers)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	fromSecret := false
	for _, e := range c.Env {
		if e.Name != "ONETICK_HTTP_TOKEN" {
			continue
		}
		if e.Value != nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Optional ||
			e.ValueFrom.SecretKeyRef.Name == "" || e.ValueFrom.SecretKeyRef.Key == "" {
			t.Fatalf("ONETICK_HTTP_TOKEN is not taken from a required Secret: %+v", e)
		}
		fromSecret = true
	}
	if !fromSecret {
		t.Fatal("the deployment sets no ONETICK_HTTP_TOKEN")
	}

	t.Setenv("ONETICK_HTTP_TOKEN", "0123456789abcdef0123456789abcdef")
	f, err := config.Parse("configmap.yaml onetick.yaml", []byte(cm.Data["onetick.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range c.Args {
		if l, ok := strings.CutPrefix(a, "--listen="); ok {
			f.HTTP.Listen = l
		}
	}
	if f.HTTP.Loopback() || f.HTTP.Token != "0123456789abcdef0123456789abcdef" || f.HTTPWarnings() != nil {
		t.Fatalf("listen %s, token from the environment %v, warnings %v", f.HTTP.Listen, f.HTTP.Token != "", f.HTTPWarnings())
	}
	// Without the Secret's variable the configuration is refused.
	os.Unsetenv("ONETICK_HTTP_TOKEN")
	if _, err := config.Parse("onetick.yaml", []byte(cm.Data["onetick.yaml"])); err == nil || !strings.Contains(err.Error(), "ONETICK_HTTP_TOKEN is not set") {
		t.Fatalf("without the token: %v", err)
	}
}

func read(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
