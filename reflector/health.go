package reflector

import "fmt"

// reportHealth reports OK, or Degraded naming the rejected keys, and
// updates what Rejected returns.
func (m *Multi[In]) reportHealth() {
	var now []Rejection
	objects := 0
	for _, f := range m.fills {
		now = append(now, f.rejections()...)
		objects += f.objects()
	}
	m.rejectedNow.Store(&now)
	if m.cfg.Health == nil {
		return
	}
	if len(now) == 0 {
		m.cfg.Health.OK(fmt.Sprintf("%d objects at revision %d", objects, m.reached.Load()))
		return
	}
	shown := now[:min(len(now), 10)]
	reason := fmt.Sprintf("%d objects rejected:", len(now))
	for _, r := range shown {
		reason += fmt.Sprintf(" %s: %s;", r.name(), r.Error)
	}
	m.cfg.Health.Degraded(reason[:len(reason)-1], fmt.Errorf("%s: %s", shown[0].name(), shown[0].Error))
}

// name is the rejected key, with its table if it has one.
func (r Rejection) name() string {
	if r.Table == "" {
		return r.Key
	}
	return r.Table + " " + r.Key
}

func (m *Multi[In]) degraded(reason string, err error) {
	if m.cfg.Health != nil {
		m.cfg.Health.Degraded(reason, err)
	}
}
