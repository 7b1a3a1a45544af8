package deploy_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/config"
)

// object is the part of a Kubernetes object the example uses; the decoder
// ignores the rest.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`       // ConfigMap: text; Secret: base64
	StringData map[string]string `yaml:"stringData"` // Secret
	Spec       struct {
		Replicas *int `yaml:"replicas"`
		Strategy struct {
			Type string `yaml:"type"`
		} `yaml:"strategy"`
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	SecurityContext securityContext `yaml:"securityContext"`
	InitContainers  []container     `yaml:"initContainers"`
	Containers      []container     `yaml:"containers"`
	Volumes         []volume        `yaml:"volumes"`
}

type container struct {
	Name            string           `yaml:"name"`
	RestartPolicy   string           `yaml:"restartPolicy"`
	Command         []string         `yaml:"command"`
	Args            []string         `yaml:"args"`
	SecurityContext *securityContext `yaml:"securityContext"`
	StartupProbe    *probe           `yaml:"startupProbe"`
	ReadinessProbe  *probe           `yaml:"readinessProbe"`
	LivenessProbe   *probe           `yaml:"livenessProbe"`
	VolumeMounts    []volumeMount    `yaml:"volumeMounts"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	ReadOnly  bool   `yaml:"readOnly"`
}

// securityContext holds the fields of both the pod's and a container's.
type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	RunAsGroup               *int64 `yaml:"runAsGroup"`
	FSGroup                  *int64 `yaml:"fsGroup"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	Capabilities             struct {
		Add  []string `yaml:"add"`
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
}

type probe struct {
	Exec *struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
}

type volume struct {
	Name      string `yaml:"name"`
	Projected *struct {
		DefaultMode *int `yaml:"defaultMode"`
		Sources     []struct {
			ConfigMap *keyRef `yaml:"configMap"`
			Secret    *keyRef `yaml:"secret"`
		} `yaml:"sources"`
	} `yaml:"projected"`
	ConfigMap *keyRef `yaml:"configMap"`
	Secret    *struct {
		SecretName string `yaml:"secretName"`
		Items      []item `yaml:"items"`
	} `yaml:"secret"`
	EmptyDir              *struct{} `yaml:"emptyDir"`
	PersistentVolumeClaim *struct {
		ClaimName string `yaml:"claimName"`
	} `yaml:"persistentVolumeClaim"`
	HostPath *struct {
		Path string `yaml:"path"`
		Type string `yaml:"type"`
	} `yaml:"hostPath"`
}

type keyRef struct {
	Name  string `yaml:"name"`
	Items []item `yaml:"items"`
}

type item struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

// loadManifests decodes every document of the files kustomization.yaml
// lists.
func loadManifests(t *testing.T) []*object {
	t.Helper()
	var k struct {
		Resources []string `yaml:"resources"`
	}
	data, err := os.ReadFile("kubernetes/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("kubernetes/kustomization.yaml: %v", err)
	}
	if len(k.Resources) == 0 {
		t.Fatal("kubernetes/kustomization.yaml lists no resources")
	}
	var objs []*object
	for _, r := range k.Resources {
		name := filepath.Join("kubernetes", r)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("kustomization.yaml lists %s: %v", r, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			o := new(object)
			err := dec.Decode(o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: a document without kind or metadata.name", name)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

// image is what the Dockerfile says about the image.
type image struct {
	stages      []string          // each FROM's argument, in order
	args        map[string]string // ARG NAME=DEFAULT, of all stages
	labels      map[string]string
	uid, gid    int64
	entrypoint  []string
	cmd         []string
	healthcheck []string // the CMD of HEALTHCHECK, in JSON form
	copies      []string // each COPY's arguments
}

// instructions splits a Dockerfile into instructions: comments dropped,
// lines ending in a backslash joined with the next.
func instructions(t *testing.T, name string) [][2]string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || line == "" && cur.Len() == 0 {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(l + " ")
			continue
		}
		cur.WriteString(line)
		instr, arg, _ := strings.Cut(cur.String(), " ")
		out = append(out, [2]string{strings.ToUpper(instr), strings.TrimSpace(arg)})
		cur.Reset()
	}
	return out
}

// labelPair matches one KEY="VALUE" of a LABEL instruction.
var labelPair = regexp.MustCompile(`([A-Za-z0-9._-]+)="([^"]*)"`)

func loadDockerfile(t *testing.T) image {
	t.Helper()
	img := image{args: map[string]string{}, labels: map[string]string{}}
	execForm := func(instr, arg string) []string {
		var v []string
		if err := json.Unmarshal([]byte(arg), &v); err != nil {
			t.Fatalf("Dockerfile: %s %s: want the JSON (exec) form: %v", instr, arg, err)
		}
		return v
	}
	for _, in := range instructions(t, "../Dockerfile") {
		instr, arg := in[0], in[1]
		switch instr {
		case "FROM":
			img.stages = append(img.stages, arg)
		case "ARG":
			name, def, _ := strings.Cut(arg, "=")
			img.args[name] = def
		case "LABEL":
			for _, m := range labelPair.FindAllStringSubmatch(arg, -1) {
				img.labels[m[1]] = m[2]
			}
		case "USER":
			u, g, _ := strings.Cut(arg, ":")
			uid, err1 := strconv.ParseInt(u, 10, 32)
			gid, err2 := strconv.ParseInt(g, 10, 32)
			if err1 != nil || err2 != nil {
				t.Fatalf("Dockerfile: USER %s: want numeric UID:GID (a scratch image has no user database to look names up in)", arg)
			}
			img.uid, img.gid = uid, gid
		case "ENTRYPOINT":
			img.entrypoint = execForm(instr, arg)
		case "CMD":
			img.cmd = execForm(instr, arg)
		case "HEALTHCHECK":
			_, c, ok := strings.Cut(arg, "CMD ")
			if !ok {
				t.Fatalf("Dockerfile: HEALTHCHECK %s: want CMD [...]", arg)
			}
			img.healthcheck = execForm(instr, c)
		case "COPY":
			img.copies = append(img.copies, arg)
		}
	}
	return img
}

// TestDockerfile checks the image's contract: built from source in a Go
// image any registry-less machine can substitute, an empty final image, a
// numeric non-root user, the daemon as entry point reading the config
// where the README and the Kubernetes example mount it, a health check on
// that config's control socket, and the labels a registry shows.
func TestDockerfile(t *testing.T) {
	img := loadDockerfile(t)
	if len(img.stages) != 2 || !strings.HasPrefix(img.stages[0], "${GO_IMAGE} ") || img.stages[1] != "scratch" {
		t.Errorf("FROM %q, want [${GO_IMAGE} AS build, scratch]: a build stage whose Go image a build argument names, then an empty image", img.stages)
	}
	if def := img.args["GO_IMAGE"]; !strings.HasPrefix(def, "docker.io/library/golang:") {
		t.Errorf("ARG GO_IMAGE=%s, want the official Go image by default", def)
	}
	if img.uid == 0 || img.gid == 0 {
		t.Errorf("USER %d:%d, want a non-root uid and gid", img.uid, img.gid)
	}
	if want := []string{"/ipsecd"}; !slices.Equal(img.entrypoint, want) {
		t.Errorf("ENTRYPOINT %q, want %q", img.entrypoint, want)
	}
	if want := []string{"run", "--config", "/etc/ipsecd/ipsecd.yaml"}; !slices.Equal(img.cmd, want) {
		t.Errorf("CMD %q, want %q", img.cmd, want)
	}
	if want := []string{"/ipsecd", "health", "--config", "/etc/ipsecd/ipsecd.yaml"}; !slices.Equal(img.healthcheck, want) {
		t.Errorf("HEALTHCHECK CMD %q, want %q", img.healthcheck, want)
	}
	// The license label names what LICENSE holds.
	license, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(license, []byte("Apache License")) || !bytes.Contains(license, []byte("Version 2.0")) {
		t.Errorf("LICENSE is not the Apache License 2.0 the label names")
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   "https://github.com/ipsecd/ipsecd",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.version":  "${VERSION}",
		"org.opencontainers.image.revision": "${REVISION}",
	} {
		if got, ok := img.labels[k]; !ok || got != want {
			t.Errorf("LABEL %s=%q, want %q", k, got, want)
		}
	}
	// Nothing is copied from outside the repository's sources: the
	// binary comes from the build stage.
	for _, c := range img.copies {
		if strings.Contains(c, "dist/") {
			t.Errorf("COPY %s: want no prebuilt binary (podman build . works from a clean clone)", c)
		}
	}
	// The file tree the Dockerfile copies from must exist.
	for _, dir := range []string{"image/rootfs/etc", "image/rootfs/run", "image/run-ipsecd", "image/var-lib-ipsecd"} {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("deploy/%s: want a directory (the Dockerfile copies it): %v", dir, err)
		}
	}
}

// TestKubernetesExample lays the Kubernetes example's config and keys out
// as the kubelet would mount them, loads the config with the real loader,
// and checks the sidecar against it and against the image.
func TestKubernetesExample(t *testing.T) {
	objs := loadManifests(t)
	img := loadDockerfile(t)
	root := t.TempDir()
	cfg, errs := checkExample(objs, img, root)
	for _, err := range errs {
		t.Error(err)
	}
	if cfg == nil {
		return
	}
	if len(cfg.Interfaces) == 0 || len(cfg.States) == 0 {
		t.Errorf("the example's config has %d interfaces and %d states; want a working tunnel", len(cfg.Interfaces), len(cfg.States))
	}
	t.Logf("example config: %s", cfg.Summary())
}

// TestKubernetesExampleCheckFails makes sure the check above catches the
// ways the example could rot: each case breaks one thing and wants an
// error that names it.
func TestKubernetesExampleCheckFails(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(objs []*object)
		want   string
	}{
		{"secret without a key the config names", func(objs []*object) {
			s := find(objs, "Secret", "ipsecd-keys")
			delete(s.StringData, "in.key")
			delete(s.Data, "in.key")
		}, `Secret ipsecd-keys has no key "in.key"`},
		{"config that does not load", func(objs []*object) {
			c := find(objs, "ConfigMap", "ipsecd-config")
			c.Data["ipsecd.yaml"] = strings.Replace(c.Data["ipsecd.yaml"], "if_id: 1", "if_id: 0", 1)
		}, "if_id"},
		{"NET_RAW without raw_esp", func(objs []*object) {
			sc := sidecar(objs).SecurityContext
			sc.Capabilities.Add = append(sc.Capabilities.Add, "NET_RAW")
		}, "capabilities.add"},
		{"running as root", func(objs []*object) {
			uid := int64(0)
			sidecar(objs).SecurityContext.RunAsUser = &uid
		}, "runAsUser"},
		{"writable root file system", func(objs []*object) {
			f := false
			sidecar(objs).SecurityContext.ReadOnlyRootFilesystem = &f
		}, "readOnlyRootFilesystem"},
		{"probe on another socket", func(objs []*object) {
			sidecar(objs).ReadinessProbe.Exec.Command = []string{"/ipsecd", "health", "--control", "/tmp/other.sock"}
		}, "readinessProbe"},
		{"no /dev/net/tun", func(objs []*object) {
			c := sidecar(objs)
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m volumeMount) bool { return m.MountPath == "/dev/net/tun" })
		}, "/dev/net/tun"},
		{"key files only root can read", func(objs []*object) {
			spec := &find(objs, "Deployment", "app-with-ipsecd").Spec.Template.Spec
			spec.SecurityContext.FSGroup = nil
		}, "cannot read"},
		{"state_dir not persistent", func(objs []*object) {
			c := sidecar(objs)
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m volumeMount) bool { return m.Name == "ipsecd-state" })
		}, "state_dir"},
		{"a real key committed", func(objs []*object) {
			find(objs, "Secret", "ipsecd-keys").StringData["out.key"] = "0x000102030405060708090a0b0c0d0e0f10111213"
		}, "placeholder"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := loadManifests(t)
			if find(objs, "Secret", "ipsecd-keys") == nil || sidecar(objs) == nil {
				t.Fatal("the example lacks the Secret ipsecd-keys or the ipsecd container")
			}
			tt.mutate(objs)
			_, errs := checkExample(objs, loadDockerfile(t), t.TempDir())
			for _, err := range errs {
				if strings.Contains(err.Error(), tt.want) {
					return
				}
			}
			t.Errorf("got errors %v, want one containing %q", errs, tt.want)
		})
	}
}

func find(objs []*object, kind, name string) *object {
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	return nil
}

// sidecar returns the ipsecd container of the example's Deployment.
func sidecar(objs []*object) *container {
	d := find(objs, "Deployment", "app-with-ipsecd")
	if d == nil {
		return nil
	}
	spec := &d.Spec.Template.Spec
	for _, list := range [][]container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name == "ipsecd" {
				return &list[i]
			}
		}
	}
	return nil
}

// placeholderKey is what the example's Secret may hold: one byte
// repeated (0x0000..., 0x1111...), never a real key. Each key needs a
// placeholder of its own, as ipsecd refuses one key in two SAs.
var placeholderKey = regexp.MustCompile(`^0x(00)+$|^0x(11)+$|^0x(22)+$|^0x(33)+$`)

// checkExample writes the files the sidecar's volumes would hold under
// root, loads its config from there, and returns the config and
// everything wrong with the example.
func checkExample(objs []*object, img image, root string) (*config.Config, []error) {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	d := find(objs, "Deployment", "app-with-ipsecd")
	c := sidecar(objs)
	if d == nil || c == nil {
		return nil, []error{errors.New("no Deployment app-with-ipsecd with a container named ipsecd")}
	}
	spec := &d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != "Recreate" {
		fail("Deployment: want replicas 1 and strategy Recreate: two pods with the same SAs would break each other's tunnel")
	}
	if slices.ContainsFunc(spec.InitContainers, func(x container) bool { return x.Name == "ipsecd" }) && c.RestartPolicy != "Always" {
		fail("ipsecd is an init container without restartPolicy: Always: it would have to exit before the application starts")
	}
	for _, x := range spec.Containers {
		if x.Name != "ipsecd" && x.SecurityContext != nil && len(x.SecurityContext.Capabilities.Add) != 0 {
			fail("container %s adds capabilities %v: only the sidecar needs any", x.Name, x.SecurityContext.Capabilities.Add)
		}
	}

	// The volumes, as the kubelet lays them out.
	volumes := map[string]volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var writable []string   // emptyDir mount paths
	var persistent []string // persistentVolumeClaim mount paths
	tun := false
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			fail("ipsecd mounts volume %s, which the pod does not define", m.Name)
			continue
		}
		switch {
		case v.Projected != nil:
			// The kubelet writes the files as root's, with group
			// fsGroup when the pod has one; ipsecd is not root.
			mode := 0o644
			if v.Projected.DefaultMode != nil {
				mode = *v.Projected.DefaultMode
			}
			if mode&0o004 == 0 && (mode&0o040 == 0 || spec.SecurityContext.FSGroup == nil) {
				fail("volume %s: defaultMode %#o with fsGroup %v: ipsecd (uid %d) cannot read its config and keys", v.Name, mode, deref(spec.SecurityContext.FSGroup), img.uid)
			}
			for _, src := range v.Projected.Sources {
				switch {
				case src.ConfigMap != nil:
					errs = append(errs, project(objs, "ConfigMap", src.ConfigMap.Name, src.ConfigMap.Items, root, m.MountPath)...)
				case src.Secret != nil:
					errs = append(errs, project(objs, "Secret", src.Secret.Name, src.Secret.Items, root, m.MountPath)...)
				}
			}
		case v.ConfigMap != nil:
			errs = append(errs, project(objs, "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items, root, m.MountPath)...)
		case v.Secret != nil:
			errs = append(errs, project(objs, "Secret", v.Secret.SecretName, v.Secret.Items, root, m.MountPath)...)
		case v.EmptyDir != nil:
			writable = append(writable, m.MountPath)
		case v.PersistentVolumeClaim != nil:
			if find(objs, "PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName) == nil {
				fail("volume %s: no PersistentVolumeClaim %s in the example", v.Name, v.PersistentVolumeClaim.ClaimName)
				continue
			}
			persistent = append(persistent, m.MountPath)
		case v.HostPath != nil:
			if m.MountPath == "/dev/net/tun" && v.HostPath.Path == "/dev/net/tun" && v.HostPath.Type == "CharDevice" {
				tun = true
			}
		}
	}
	if !tun {
		fail("ipsecd has no /dev/net/tun: want a hostPath volume of type CharDevice mounted there")
	}

	// The config, loaded by the real loader from where the args say.
	args := c.Args
	if len(c.Command) != 0 {
		args = c.Command[1:]
		if c.Command[0] != "/ipsecd" {
			fail("ipsecd's command runs %s, want /ipsecd", c.Command[0])
		}
	}
	if len(args) == 0 {
		args = img.cmd
	}
	i := slices.Index(args, "--config")
	if len(args) == 0 || args[0] != "run" || i < 0 || i+1 >= len(args) {
		return nil, append(errs, fmt.Errorf("ipsecd's args %q: want run --config FILE", args))
	}
	cfgPath := args[i+1]
	cfg, err := config.Load(filepath.Join(root, cfgPath))
	if err != nil {
		return nil, append(errs, fmt.Errorf("ipsecd's config %s does not load:\n%v", cfgPath, err))
	}

	// Privileges: exactly what the config needs, as the image's user.
	sc := c.SecurityContext
	if sc == nil {
		return cfg, append(errs, errors.New("ipsecd has no securityContext"))
	}
	pod := spec.SecurityContext
	runAsUser := cmpOr(sc.RunAsUser, pod.RunAsUser)
	if runAsUser == nil || *runAsUser != img.uid {
		fail("ipsecd's runAsUser is %v, want the image's user %d", deref(runAsUser), img.uid)
	}
	if nonRoot := cmpOr(sc.RunAsNonRoot, pod.RunAsNonRoot); nonRoot == nil || !*nonRoot {
		fail("ipsecd's runAsNonRoot is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		fail("ipsecd's allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		fail("ipsecd's readOnlyRootFilesystem is not true")
	}
	if !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		fail("ipsecd's capabilities.drop is %v, want [ALL]", sc.Capabilities.Drop)
	}
	wantCaps := []string{"NET_ADMIN"}
	if cfg.Underlay.RawESP {
		wantCaps = append(wantCaps, "NET_RAW")
	}
	if add := slices.Sorted(slices.Values(sc.Capabilities.Add)); !slices.Equal(add, wantCaps) {
		fail("ipsecd's capabilities.add is %v, want %v for raw_esp: %v", sc.Capabilities.Add, wantCaps, cfg.Underlay.RawESP)
	}

	// The state directory: below a persistent volume's mount (ipsecd
	// makes it 0700 itself), so that a re-created pod continues the
	// static keys' sequence numbers instead of reusing nonces.
	if !slices.ContainsFunc(persistent, func(dir string) bool { return strings.HasPrefix(cfg.StateDir, dir+"/") }) {
		fail("state_dir %s is not below a persistentVolumeClaim of ipsecd (mounted: %v): a re-created pod would start its static keys at 1 again, or ipsecd refuses them on the read-only root file system", cfg.StateDir, persistent)
	}

	// The control socket: on a writable volume, and what the probes ask.
	if !slices.ContainsFunc(writable, func(dir string) bool { return path.Dir(cfg.Control) == dir }) {
		fail("the control socket %s is not in an emptyDir of ipsecd (mounted: %v): the root file system is read-only", cfg.Control, writable)
	}
	for _, p := range []struct {
		name string
		p    *probe
	}{{"startupProbe", c.StartupProbe}, {"readinessProbe", c.ReadinessProbe}, {"livenessProbe", c.LivenessProbe}} {
		if p.p == nil {
			if p.name != "livenessProbe" {
				fail("ipsecd has no %s", p.name)
			}
			continue
		}
		want := []string{"/ipsecd", "health", "--control", cfg.Control}
		if p.p.Exec == nil || !slices.Equal(p.p.Exec.Command, want) {
			var got []string
			if p.p.Exec != nil {
				got = p.p.Exec.Command
			}
			fail("ipsecd's %s runs %q, want %q", p.name, got, want)
		}
	}

	// The Secret holds placeholders only: a real key must never be
	// committed with the example.
	if s := find(objs, "Secret", "ipsecd-keys"); s != nil {
		for k, v := range secretData(s) {
			if !placeholderKey.MatchString(strings.TrimSpace(string(v))) {
				fail("Secret ipsecd-keys: %s is not a placeholder (0x00..., 0x11...): never commit a real key", k)
			}
		}
	}
	return cfg, errs
}

// project writes the named ConfigMap's or Secret's items (all its keys
// when items is empty) under root+mountPath, as a projected volume holds
// them.
func project(objs []*object, kind, name string, items []item, root, mountPath string) []error {
	o := find(objs, kind, name)
	if o == nil {
		return []error{fmt.Errorf("the pod mounts %s %s, which the manifests do not define", kind, name)}
	}
	data := o.Data
	if kind == "Secret" {
		data = map[string]string{}
		for k, v := range secretData(o) {
			data[k] = string(v)
		}
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, item{Key: k, Path: k})
		}
	}
	var errs []error
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			errs = append(errs, fmt.Errorf("%s %s has no key %q (the pod mounts it as %s)", kind, name, it.Key, it.Path))
			continue
		}
		if !filepath.IsLocal(it.Path) {
			errs = append(errs, fmt.Errorf("%s %s: item path %q leaves the volume", kind, name, it.Path))
			continue
		}
		dst := filepath.Join(root, mountPath, it.Path)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return append(errs, err)
		}
		if err := os.WriteFile(dst, []byte(v), 0o600); err != nil {
			return append(errs, err)
		}
	}
	return errs
}

// secretData merges a Secret's data (base64) and stringData, as the API
// server does.
func secretData(s *object) map[string][]byte {
	m := map[string][]byte{}
	for k, v := range s.Data {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			b = []byte("not base64: " + err.Error())
		}
		m[k] = b
	}
	for k, v := range s.StringData {
		m[k] = []byte(v)
	}
	return m
}

// cmpOr returns the container's setting if it has one, else the pod's.
func cmpOr[T any](container, pod *T) *T {
	if container != nil {
		return container
	}
	return pod
}

func deref(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}
