package splitmix

import "testing"

// The reference outputs of SplitMix64 seeded with 0 and with
// 1234567 (the first values of the published generator,
// https://prng.di.unimi.it/splitmix64.c), stepped as the generator steps
// its state by Golden.
func TestNextMatchesTheReference(t *testing.T) {
	for _, c := range []struct {
		seed uint64
		want []uint64
	}{
		{0, []uint64{0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F}},
		{1234567, []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423}},
	} {
		state := c.seed
		for i, want := range c.want {
			if got := Next(state); got != want {
				t.Errorf("seed %d, output %d: %#x, want %#x", c.seed, i, got, want)
			}
			state += Golden
		}
	}
}

func TestMixIsNextLessTheIncrement(t *testing.T) {
	for _, x := range []uint64{0, 1, 42, 1 << 63, ^uint64(0)} {
		if Mix(x+Golden) != Next(x) {
			t.Errorf("Mix(%d+Golden) != Next(%d)", x, x)
		}
	}
	if Mix(0) != 0 {
		t.Errorf("Mix(0) = %#x, want 0 (the finalizer fixes 0)", Mix(0))
	}
}
