package lab

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/reliability"
)

// A policy reaches a sweep's worker as a value (workerRequest): every
// preset and pair comes back from its JSON as it left, its kinds by their
// packages' names.
func TestPoliciesTravelAsValues(t *testing.T) {
	pairs, err := LookupJobPolicies([]string{"forgive-owner+gbn", "nscc+idle"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(Policies(), pairs...) {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		var back Policy
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if !reflect.DeepEqual(back, p) {
			t.Errorf("%s came back as %+v", p.Name, back)
		}
	}
	owner, _ := LookupPolicies([]string{"forgive-owner"})
	b, _ := json.Marshal(owner[0])
	for _, want := range []string{`"CC":"dcqcn"`, `"Mode":"selective-repeat"`, `"Gather":"owner"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("forgive-owner's JSON %s lacks %s", b, want)
		}
	}
	for _, bad := range []func(*Policy){
		func(p *Policy) { p.CC = congestion.Kind(9) },
		func(p *Policy) { p.Mode = reliability.Mode(7) },
		func(p *Policy) { p.Gather = budget.NumGatherPolicies },
	} {
		p := owner[0]
		bad(&p)
		if _, err := json.Marshal(p); err == nil {
			t.Errorf("a kind with no name travelled: %+v", p.HostPolicy)
		}
	}
	for _, doc := range []string{`{"CC":"cubic"}`, `{"Mode":"tcp"}`, `{"Gather":"always"}`} {
		var p Policy
		if err := json.Unmarshal([]byte(doc), &p); err == nil {
			t.Errorf("%s decoded as %+v", doc, p.HostPolicy)
		}
	}
}
