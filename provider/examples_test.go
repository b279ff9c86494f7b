package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"renga.dev/renga/provider/internal/provider"
)

const examplesDir = "../examples"

// terraformBinary is the terraform the tests use, or skips them when there is none and
// acceptance tests were not asked for.
func terraformBinary(t *testing.T) string {
	t.Helper()
	if tf := os.Getenv("TF_ACC_TERRAFORM_PATH"); tf != "" {
		return tf
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		if os.Getenv("TF_ACC") != "" {
			t.Fatal("TF_ACC is set but there is no terraform on PATH")
		}
		t.Skip("no terraform on PATH")
	}
	return tf
}

// Every example passes `terraform validate` against the provider built from this tree, through a
// dev_overrides CLI configuration: offline, no `terraform init`, no registry.
func TestExamplesValidate(t *testing.T) {
	tf := terraformBinary(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "terraform-provider-renga"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rc := filepath.Join(bin, "terraformrc")
	cfg := `provider_installation {
  dev_overrides {
    "renga/renga" = "` + bin + `"
  }
  direct {}
}
`
	if err := os.WriteFile(rc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")

	if out, err := command(env, examplesDir, tf, "fmt", "-check", "-recursive", "-diff").CombinedOutput(); err != nil {
		t.Errorf("terraform fmt -check: %v (run make generate)\n%s", err, out)
	}

	dirs := exampleDirs(t)
	if len(dirs) < 9 {
		t.Fatalf("found %d example directories: %v", len(dirs), dirs)
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			declares := false
			entries, err := os.ReadDir(filepath.Join(examplesDir, dir))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.IsDir() || !strings.HasSuffix(e.Name(), ".tf") {
					continue
				}
				b, err := os.ReadFile(filepath.Join(examplesDir, dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				declares = declares || strings.Contains(string(b), "required_providers")
				if err := os.WriteFile(filepath.Join(work, e.Name()), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// Resource and data source examples are fragments (tfplugindocs shows them as
			// they are); give them the provider's source address.
			if !declares {
				req := "terraform {\n  required_providers {\n    renga = {\n      source = \"renga/renga\"\n    }\n  }\n}\n"
				if err := os.WriteFile(filepath.Join(work, "zz_required_providers.tf"), []byte(req), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out, _ := command(env, work, tf, "validate", "-json", "-no-color").Output()
			var result struct {
				Valid       bool `json:"valid"`
				Diagnostics []struct {
					Severity, Summary, Detail string
				} `json:"diagnostics"`
			}
			if err := json.Unmarshal(out, &result); err != nil {
				t.Fatalf("terraform validate: %v\n%s", err, out)
			}
			if !result.Valid {
				t.Errorf("examples/%s is not valid: %+v", dir, result.Diagnostics)
			}
		})
	}
}

func command(env []string, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	return cmd
}

// exampleDirs lists the directories under examples/ that hold .tf files.
func exampleDirs(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	var dirs []string
	err := filepath.WalkDir(examplesDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".tf") {
			return err
		}
		rel, err := filepath.Rel(examplesDir, filepath.Dir(path))
		if err == nil && !seen[rel] {
			seen[rel] = true
			dirs = append(dirs, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// Every resource and data source has the examples tfplugindocs puts in its page.
func TestEveryTypeHasExamples(t *testing.T) {
	ctx := context.Background()
	p := provider.New("test")()
	var meta fwprovider.MetadataResponse
	p.Metadata(ctx, fwprovider.MetadataRequest{}, &meta)
	for _, newResource := range p.Resources(ctx) {
		var r resource.MetadataResponse
		newResource().Metadata(ctx, resource.MetadataRequest{ProviderTypeName: meta.TypeName}, &r)
		for _, f := range []string{"resource.tf", "import.sh"} {
			if _, err := os.Stat(filepath.Join(examplesDir, "resources", r.TypeName, f)); err != nil {
				t.Errorf("resource %s: %v", r.TypeName, err)
			}
		}
	}
	for _, newDataSource := range p.DataSources(ctx) {
		var d datasource.MetadataResponse
		newDataSource().Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: meta.TypeName}, &d)
		if _, err := os.Stat(filepath.Join(examplesDir, "data-sources", d.TypeName, "data-source.tf")); err != nil {
			t.Errorf("data source %s: %v", d.TypeName, err)
		}
	}
}
