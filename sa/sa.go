package sa

// SA is a security association. Placeholder: the sa-core work replaces this file.
type SA struct{}
