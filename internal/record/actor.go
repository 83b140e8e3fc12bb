package record

import (
	"context"

	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// Actor is whom an act is taken for: one of this instance's agents, handed
// out by [Engine.Agent] only for an agent the instance has, or the
// instance itself, which only the engine names (instanceActor: what it
// takes in answer to its counterparty, at a deadline, when a held act is
// released). Every act takes its Actor as a parameter, so an act cannot be
// expressed without saying for whom, and the zero Actor acts for nobody:
// every act refuses it. An agent acts only under a mandate issued to it
// (decisions.md 9); the instance, under any of its agents' mandates.
type Actor struct {
	agent string
	self  bool
}

// instanceActor is the instance acting for itself.
var instanceActor = Actor{self: true}

// AgentID is the agent a acts for; "" for the instance itself.
func (a Actor) AgentID() string { return a.agent }

// Agent returns the Actor of agentID, one of this instance's agents;
// anyone else is refused (A202-POLICY-DENIED).
func (e *Engine) Agent(agentID string) (Actor, error) {
	if agentID == "" || !e.org.Config().HasAgent(agentID) {
		return Actor{}, refusef(reason.PolicyDenied, "%q is not an agent of this instance", agentID)
	}
	return Actor{agent: agentID}, nil
}

// mandateRecord returns the stored row of mandate id, one of this
// instance's agents' mandates that a may act under: for an agent, only
// its own (org.AgentMandateRecord); for the instance, any of them.
func (e *Engine) mandateRecord(ctx context.Context, a Actor, id string) (store.MandateRecord, error) {
	switch {
	case a.self:
		return e.org.OwnMandateRecord(ctx, id)
	case a.agent != "":
		return e.org.AgentMandateRecord(ctx, a.agent, id)
	}
	return store.MandateRecord{}, errNoActor
}

// errNoActor refuses the zero Actor.
var errNoActor = refusef(reason.PolicyDenied, "an act must name the agent it is taken for")
