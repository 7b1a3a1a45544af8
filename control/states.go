package control

import (
	"errors"

	"github.com/ipsecd/ipsecd/sa"
)

// The state.* commands: SAs, as ip xfrm state.

func (s *Server) stateList(req *Request) (any, error) {
	states := s.backend.States(req.Keys)
	for i := range states {
		redact(&states[i], req.Keys)
	}
	return nonNil(states), nil
}

func (s *Server) stateGet(req *Request) (any, error) {
	id, err := req.stateID()
	if err != nil {
		return nil, err
	}
	st, err := s.backend.GetState(id, req.Keys)
	if err != nil {
		return nil, err
	}
	redact(&st, req.Keys)
	return st, nil
}

func (s *Server) stateDelete(req *Request) (any, error) {
	id, err := req.stateID()
	if err != nil {
		return nil, err
	}
	return nil, s.backend.DeleteState(id)
}

func (s *Server) stateAdd(req *Request) (any, error) {
	if req.State == nil {
		return nil, invalid(errors.New(`missing "state"`))
	}
	c, err := req.State.Config()
	if err != nil {
		return nil, invalid(err)
	}
	if err := sa.Check(&c); err != nil {
		return nil, invalid(err)
	}
	return nil, s.backend.AddState(c)
}

// stateID reads the request's "id".
func (req *Request) stateID() (StateID, error) {
	if req.ID == nil {
		return StateID{}, invalid(errors.New(`missing "id"`))
	}
	id, err := req.ID.StateID()
	if err != nil {
		return id, invalid(err)
	}
	return id, nil
}

// redact removes the keys of st unless they were asked for.
func redact(st *StateInfo, keys bool) {
	if !keys {
		st.Config = st.Config.Redacted()
	}
}
