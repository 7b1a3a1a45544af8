package control

// The read-only counters: stats (the global xfrm counters) and
// interface.list (each interface with its counters).

func (s *Server) stats(*Request) (any, error) { return nonNil(s.backend.Stats()), nil }

func (s *Server) interfaceList(*Request) (any, error) { return nonNil(s.backend.Interfaces()), nil }

// nonNil makes an empty list marshal as [] rather than null.
func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
