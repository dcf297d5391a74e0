package hostapi

import (
	"encoding/json"
	"testing"
)

// The entropy policies by name, in the order the wire's JSON and the
// Python client list them: message comes after the three that were
// there first, so no existing value changes.
func TestEntropyNames(t *testing.T) {
	for i, name := range []string{"single", "spray", "subflows", "message"} {
		e := Entropy(i)
		if e.String() != name {
			t.Errorf("Entropy(%d) is %q, want %q", i, e, name)
		}
		var back Entropy
		if err := back.UnmarshalText([]byte(name)); err != nil || back != e {
			t.Errorf("%q reads as %v, %v", name, back, err)
		}
	}
	var spec FlowSpec
	if err := json.Unmarshal([]byte(`{"flow":7,"peer":2,"class":"gradient","entropy":"message"}`), &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Entropy != EntropyMessage {
		t.Fatalf("entropy %v, want message", spec.Entropy)
	}
	if err := spec.validate(); err != nil {
		t.Fatalf("a flow with a path per message: %v", err)
	}
	spec.Subflows = 4
	if err := spec.validate(); err == nil {
		t.Fatal("subflows given with entropy message: accepted")
	}
	spec.Subflows, spec.Entropy = 0, EntropyMessage+1
	if err := spec.validate(); err == nil {
		t.Fatal("an entropy past message: accepted")
	}
}
