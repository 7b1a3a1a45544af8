//go:build linux

package integration

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The image is built as a user builds it, `podman build .` in a checkout,
// with one difference: no registry is reachable here, so the build stage's
// Go image is one made from this machine's own Go toolchain
// (goBuilderImage) and named with --build-arg GO_IMAGE.

// buildImage builds the image from a clean copy of the repository under
// a tag of this run's own, checks what the Dockerfile promises, and
// removes the image when the test ends.
func buildImage(t *testing.T, goImage string) string {
	t.Helper()
	tag := fmt.Sprintf("localhost/ipsecd-test:%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { podman("rmi", "--force", tag) })
	const version, revision = "v0.0.0-test", "0123456789abcdef0123456789abcdef01234567"
	start := time.Now()
	podmanBuild(t, cleanCheckout(t),
		"--build-arg", "GO_IMAGE="+goImage, "--build-arg", "GOPROXY="+goEnv(t, "GOPROXY"),
		"--build-arg", "VERSION="+version, "--build-arg", "REVISION="+revision,
		"-t", tag, ".")
	t.Logf("image built in %v", time.Since(start).Round(time.Millisecond))

	img := inspectImage(t, tag)
	cfg := img.Config
	if want := fmt.Sprintf("%d:%d", imageUser, imageUser); cfg.User != want {
		t.Errorf("image user %q, want %q", cfg.User, want)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/ipsecd"}) || !slices.Equal(cfg.Cmd, []string{"run", "--config", "/etc/ipsecd/ipsecd.yaml"}) {
		t.Errorf("image entrypoint %q cmd %q, want [/ipsecd] [run --config /etc/ipsecd/ipsecd.yaml]", cfg.Entrypoint, cfg.Cmd)
	}
	if want := []string{"CMD", "/ipsecd", "health", "--config", "/etc/ipsecd/ipsecd.yaml"}; !slices.Equal(img.Healthcheck.Test, want) {
		t.Errorf("image healthcheck %q, want %q", img.Healthcheck.Test, want)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   "https://github.com/ipsecd/ipsecd",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if got := img.Labels[k]; got != want {
			t.Errorf("image label %s = %q, want %q", k, got, want)
		}
	}
	// A static binary and a few small files: a size far above the
	// binary's means something else (the Go toolchain) got into the image.
	if size := img.Size; size > 40<<20 {
		t.Errorf("image size %d bytes, want under 40 MiB", size)
	}

	// The binary's file capabilities, written in the build stage and
	// carried over by COPY --from: NET_ADMIN and NET_RAW permitted, not
	// effective (the daemon raises them; see the Dockerfile).
	root := mustPodman(t, "image", "mount", tag)
	defer podman("image", "unmount", tag)
	permitted, effective, err := fileCaps(filepath.Join(root, "ipsecd"))
	if err != nil {
		t.Fatalf("the image's /ipsecd: %v", err)
	}
	if permitted != capNetAdmin|capNetRaw || effective {
		t.Errorf("the image's /ipsecd has file capabilities permitted %#x effective %v, want %#x without effective",
			permitted, effective, capNetAdmin|capNetRaw)
	}
	var files []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return nil
	})
	if want := []string{"LICENSE", "etc/group", "etc/passwd", "ipsecd"}; !slices.Equal(files, want) {
		t.Errorf("the image holds %q, want %q", files, want)
	}
	return tag
}

// imageInspect is what the tests read of podman image inspect.
type imageInspect struct {
	Size        int64
	Labels      map[string]string
	Healthcheck struct {
		Test []string
	}
	Config struct {
		User       string
		Entrypoint []string
		Cmd        []string
	}
}

func inspectImage(t *testing.T, tag string) imageInspect {
	t.Helper()
	var inspect []imageInspect
	js := mustPodman(t, "image", "inspect", tag)
	if err := json.Unmarshal([]byte(js), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect %s: %v\n%s", tag, err, js)
	}
	return inspect[0]
}

// podmanBuild runs podman build in dir with a 15-minute bound (a first
// build fetches the modules and compiles everything). The Docker format
// keeps the HEALTHCHECK (podman drops it from OCI images); without
// --layers=false every step would leave an image of its own behind.
func podmanBuild(t *testing.T, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append([]string{"build", "--format", "docker", "--layers=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("podman build %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// cleanCheckout copies what a clone of the repository holds (the files git
// tracks or would track, from the working tree: nothing .gitignore names,
// such as a binary built by hand in dist/) into a temporary directory. A
// build there proves the Dockerfile needs nothing but the sources.
func cleanCheckout(t *testing.T) string {
	t.Helper()
	// safe.directory: a checkout owned by another user than the tests'
	// root is still the one to build.
	out, err := exec.Command("git", "-c", "safe.directory=*", "-C", "..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v (the container test builds from the files a clone holds)", err)
	}
	dst := filepath.Join(t.TempDir(), "ipsecd")
	n := 0
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src := filepath.Join("..", name)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a symlink (none ship)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		// A checkout's modes: 0755 or 0644, as git records them.
		mode := os.FileMode(0o644)
		if fi.Mode()&0o100 != 0 {
			mode = 0o755
		}
		path := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 50 {
		t.Fatalf("git ls-files listed %d files; want a whole checkout", n)
	}
	return dst
}

// goEnv returns go env NAME.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// goBuilderImage makes a local image from this machine's Go toolchain for
// the Dockerfile's build stage: GOROOT at /usr/local/go (on PATH), an
// empty /tmp, and the CA certificates for the module proxy. The
// Dockerfile's RUN steps use the exec form, so no shell is needed. It is
// removed when the test ends.
func goBuilderImage(t *testing.T) string {
	t.Helper()
	goroot := goEnv(t, "GOROOT")
	tag := fmt.Sprintf("localhost/ipsecd-test-go:%d-%d", os.Getpid(), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", "import", "--quiet",
		"--change", "ENV=PATH=/usr/local/go/bin", "--change", "WORKDIR=/", "-", tag)
	pr, pw := io.Pipe()
	cmd.Stdin = pr
	go func() {
		pw.CloseWithError(writeGoRoot(pw, goroot))
	}()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	pr.Close()
	if err != nil {
		t.Fatalf("podman import (the Go builder image from %s): %v\n%s", goroot, err, out)
	}
	t.Cleanup(func() { podman("rmi", "--force", tag) })
	t.Logf("Go builder image %s from %s in %v", tag, goroot, time.Since(start).Round(time.Millisecond))
	return tag
}

// writeGoRoot writes the builder image's file tree as a tar stream.
func writeGoRoot(w io.Writer, goroot string) error {
	tw := tar.NewWriter(w)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: time.Now()})
	}
	file := func(name, src string, fi fs.FileInfo) error {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: fi.ModTime()}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, fi.Size())
		return err
	}
	for _, d := range []string{"usr", "usr/local", "etc", "etc/ssl", "etc/ssl/certs"} {
		if err := dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return err
	}
	// Symbolic links are followed (a CA bundle usually is one).
	if fi, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		if err := file("etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt", fi); err != nil {
			return err
		}
	}
	err := filepath.WalkDir(goroot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(goroot, path)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(filepath.Join("usr/local/go", rel))
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			// Go's own tests: nothing a build reads.
			if rel == "test" {
				return filepath.SkipDir
			}
			return dir(name, int64(fi.Mode().Perm()))
		case fi.Mode().IsRegular():
			return file(name, path, fi)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// imageRevision is what the revision label scripts/image.sh sets looks like.
var imageRevision = regexp.MustCompile(`^([0-9a-f]{40}|unknown)$`)

// checkImageScript builds the image with scripts/image.sh, the wrapper of
// podman build that labels it with git's version and revision.
func checkImageScript(t *testing.T, goImage string) {
	tag := fmt.Sprintf("localhost/ipsecd-test:%d-%d-script", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { podman("rmi", "--force", tag) })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../scripts/image.sh", tag)
	cmd.Env = append(os.Environ(), "GO_IMAGE="+goImage)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/image.sh %s: %v\n%s", tag, err, out)
	}
	if !strings.HasPrefix(string(out), tag+": ") {
		t.Errorf("scripts/image.sh printed %q, want %q", out, tag+": SIZE bytes")
	}
	img := inspectImage(t, tag)
	version := img.Labels["org.opencontainers.image.version"]
	revision := img.Labels["org.opencontainers.image.revision"]
	health := img.Healthcheck.Test
	if version == "" || version == "dev" || !imageRevision.MatchString(revision) || !slices.Contains(health, "health") {
		t.Errorf("scripts/image.sh: labels version %q revision %q, healthcheck %q; want git's version, a revision and the healthcheck", version, revision, health)
	}
	t.Logf("scripts/image.sh: %s, version %s, revision %s", strings.TrimSpace(string(out)), version, revision)
}
