package control

import (
	"errors"

	"github.com/ipsecd/ipsecd/sa"
)

// The policy.* commands: policies, as ip xfrm policy.

func (s *Server) policyList(*Request) (any, error) {
	ps := s.backend.Policies()
	specs := make([]PolicySpec, len(ps))
	for i, p := range ps {
		specs[i] = NewPolicySpec(p)
	}
	return specs, nil
}

func (s *Server) policyAdd(req *Request) (any, error) {
	p, err := req.policy()
	if err != nil {
		return nil, err
	}
	if err := sa.CheckPolicy(&p); err != nil {
		return nil, invalid(err)
	}
	return nil, s.backend.AddPolicy(p)
}

func (s *Server) policyDelete(req *Request) (any, error) {
	p, err := req.policy()
	if err != nil {
		return nil, err
	}
	return nil, s.backend.DeletePolicy(p)
}

// policy reads the request's "policy".
func (req *Request) policy() (sa.Policy, error) {
	if req.Policy == nil {
		return sa.Policy{}, invalid(errors.New(`missing "policy"`))
	}
	p, err := req.Policy.Policy()
	if err != nil {
		return p, invalid(err)
	}
	return p, nil
}
