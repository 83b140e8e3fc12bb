package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/bindings/peer"
	"github.com/partyd/party/internal/deadlines"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/due"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/railwork"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/releases"
)

// PeerOptions tune the record engine and its delivery.
type PeerOptions struct {
	// Carrier is the binding this instance sends with (A2A by default).
	Carrier peer.Carrier
	// Outbox tunes retries (zero values: the delivery package defaults).
	Outbox delivery.OutboxOptions
}

// Record is the Mounter that wires the transaction record: the record
// engine, which owns its delivery (a durable outbox whose worker runs for
// the daemon's life, and the inbox behind both carriers), its settlement
// rails, its loops (the settlement worker, package railwork; the release
// of approved held acts, package releases; deadlines and alerts, package
// deadlines), and the record tools. The peer binding (bindings/peer)
// serves the engine on the peer listener and is its client side.
func Record(opt PeerOptions) Mounter {
	return func(ctx context.Context, d *Daemon) error {
		o := d.Org
		client, err := peer.NewClient(o, opt.Carrier, d.Log)
		if err != nil {
			return err
		}
		reg, err := rails.Open(o.In.Dir, o.Config().Rails, o.Clock)
		if err != nil {
			return err
		}
		reg = d.Metrics.Rails(reg) // each call counted
		timing, err := timingOf(o.Config().Deadlines)
		if err != nil {
			return err
		}
		engine := record.New(record.Of(o), record.Options{Transport: client, Mandates: client, Outbox: opt.Outbox, Rails: reg, Timing: timing, Meter: d.Metrics})
		if err := engine.Start(ctx); err != nil {
			return err
		}
		engine.SubscribeAlerts(d.Metrics.Alert) // for the daemon's life
		d.Engine, d.Receiver = engine, engine
		d.AddTools(mcp.RecordTools(engine)...)
		started := d.NotReady("record", "the interrupted transactions resume and the workers start")
		go func() {
			// Transactions a restart interrupted resume once the listeners
			// are up; the outbox worker re-sends what was queued.
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			engine.Resume(ctx)
			// Each loop returns only when ctx ends.
			go func() { _ = railwork.Run(ctx, engine) }()
			go func() { _ = releases.Run(ctx, engine) }() // held acts resume once approved
			go func() { _ = deadlines.Run(ctx, engine) }()
			started()
			if err := engine.Outbox().Run(ctx); err != nil && ctx.Err() == nil {
				d.Log.Error("outbox worker stopped", "error", err)
				// Nothing would be delivered or retried any more.
				d.NotReady("outbox", "the outbox worker stopped")
			}
		}()
		return nil
	}
}

// timingOf reads config.json's deadlines; a calendar that does not parse
// stops the daemon, rather than leaving a due condition unevaluated.
func timingOf(c *instance.DeadlinesConfig) (record.Timing, error) {
	var t record.Timing
	if c == nil {
		return t, nil
	}
	t.OverdueAfter = time.Duration(c.OverdueAfterSeconds) * time.Second
	t.UnreachableAfter = time.Duration(c.PeerUnreachableAfterSeconds) * time.Second
	for name, cc := range c.Calendars {
		cal, err := due.ParseCalendar(cc.Weekend, cc.Holidays)
		if err != nil {
			return t, fmt.Errorf("config.json deadlines.calendars[%q]: %w", name, err)
		}
		if t.Calendars == nil {
			t.Calendars = map[string]due.Calendar{}
		}
		t.Calendars[name] = cal
	}
	return t, nil
}
