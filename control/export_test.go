package control

// NumConns returns how many connections s serves now, for tests that wait
// for the server to let one go.
func (s *Server) NumConns() int { return s.sock.NumConns() }
