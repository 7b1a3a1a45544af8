// Package deploy holds what ships next to the ipsecd binary: the small
// file tree of the container image (image/, used by the Dockerfile at the
// repository root), a systemd unit (systemd/) and a Kubernetes example
// (kubernetes/: ipsecd as a sidecar of an application, config in a
// ConfigMap, keys in a Secret).
//
// It has no code. Its tests read the Kubernetes manifests as the kubelet
// would lay them out, load the ipsecd config they carry with the real
// config loader, and check the sidecar's privileges against the config
// and the Dockerfile, so that the example cannot silently rot. The image
// itself is built and run by integration/container_test.go.
package deploy
