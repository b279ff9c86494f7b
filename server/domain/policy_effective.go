package domain

import (
	"encoding/json"

	"renga.dev/renga/server/domain/policyfield"
)

// Sources of effective values.
const (
	SourceOrganization = "organization"
	SourceDeployment   = "deployment"
	SourceOwner        = "owner"
)

// Sourced is an effective value and where it comes from.
type Sourced struct {
	Value  any    `json:"value"`
	Source string `json:"source"`
}

// EffectivePolicy is what is in force for an organization: every field of the table, by path.
// Its JSON is the API's EffectivePolicy without the organization's ID.
type EffectivePolicy map[policyfield.Path]Sourced

// inForce is a field's value in force: the organization's, else the deployment's, else the
// zero value of its kind.
func inForce(p, d PolicyDocument, f policyfield.Field) Sourced {
	if v, ok := p[f.Path]; ok {
		return Sourced{v, SourceOrganization}
	}
	if v, ok := d[f.Path]; ok {
		return Sourced{v, SourceDeployment}
	}
	return Sourced{zero(f.Kind), SourceDeployment}
}

func zero(k policyfield.Kind) any {
	switch k {
	case policyfield.Integer:
		return int64(0)
	case policyfield.Boolean:
		return false
	}
	return []string{}
}

// Limit is the limit in force for an organization whose policy is p, under the deployment's
// defaults d. It computes one field, not the whole view: intake calls it on every request.
func Limit(p, d PolicyDocument, path policyfield.Path) int64 {
	f, _ := policyfield.Lookup(path)
	n, _ := inForce(p, d, f).Value.(int64)
	return n
}

// Entitled says whether the entitlement is in force for an organization whose policy is p,
// under the deployment's defaults d.
func Entitled(p, d PolicyDocument, path policyfield.Path) bool {
	f, _ := policyfield.Lookup(path)
	b, _ := inForce(p, d, f).Value.(bool)
	return b
}

// Effective merges an organization's policy over the deployment defaults, and the owners'
// settings under both.
func Effective(p PolicyDocument, d PolicyDocument, s Settings) EffectivePolicy {
	e := EffectivePolicy{}
	owner := s.byField()
	for _, f := range policyfield.Fields {
		v := inForce(p, d, f)
		if f.Path.Section() == policyfield.LockedSettings && v.Source == SourceDeployment {
			if _, locked := d[f.Path]; !locked {
				v = Sourced{owner[f.Path], SourceOwner}
			}
		}
		if v.Value == nil {
			v.Value = zero(f.Kind)
		}
		if s, ok := v.Value.([]string); ok && s == nil {
			v.Value = []string{}
		}
		e[f.Path] = v
	}
	return e
}

// Locks is the set of settings locked for an organization (by its policy or the deployment's),
// as the locked_settings of a policy document.
func (e EffectivePolicy) Locks() PolicyDocument {
	l := PolicyDocument{}
	for _, f := range policyfield.In(policyfield.LockedSettings) {
		if v, ok := e[f.Path]; ok && v.Source != SourceOwner {
			l[f.Path] = v.Value
		}
	}
	return l
}

// MarshalJSON writes each section under its effective name, e.g. {"settings": {"require_sso":
// {"value": true, "source": "owner"}}}.
func (e EffectivePolicy) MarshalJSON() ([]byte, error) {
	out := map[string]map[string]Sourced{}
	for _, s := range policyfield.Sections {
		part := map[string]Sourced{}
		for _, f := range policyfield.In(s.Name) {
			if v, ok := e[f.Path]; ok {
				part[f.Path.Name()] = v
			}
		}
		out[s.EffectiveName] = part
	}
	return json.Marshal(out)
}
