package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/tss"
)

// keygenCmd writes a fresh security-domain key file (docs/security.md).
func keygenCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen FILE",
		Short: "Write a fresh security-domain key file (mode 0600)",
		Long: `keygen writes a new random 32-byte key for a security domain to FILE, with
mode 0600, for forgived's security.domains[].key_file. Every host of the
domain needs the same file: copy it to each over a channel you trust. It
refuses to overwrite an existing file unless --force is given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if dir := filepath.Dir(path); dir != "" {
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					return cli.Usage(fmt.Errorf("keygen: %s: the directory %s does not exist", path, dir))
				}
			}
			if _, err := os.Lstat(path); err == nil && !force {
				return cli.Usage(fmt.Errorf("keygen: %s exists; --force replaces it", path))
			}
			if dryRun(cmd) {
				fmt.Fprintf(cmd.OutOrStdout(), "dry run: would write a new %d-byte key to %s with mode 0600\n", tss.KeyLen, path)
				return nil
			}
			var k tss.Key
			if _, err := rand.Read(k[:]); err != nil {
				return fmt.Errorf("keygen: %w", err)
			}
			if err := writeKeyFile(path, tss.FormatKeyFile(k), force); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (mode 0600)\n", path)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing file")
	return cmd
}

// writeKeyFile writes the key to a temporary file of mode 0600 beside
// path and renames it into place, so the key is never readable by others,
// not even for a moment, and a crash leaves no half-written key.
func writeKeyFile(path string, contents []byte, force bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".keygen-*")
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing left to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("keygen: %w", err)
	}
	if _, err := f.Write(contents); err != nil {
		f.Close()
		return fmt.Errorf("keygen: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("keygen: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if !force {
		// Link fails if path appeared meanwhile: never overwrite without --force.
		if err := os.Link(tmp, path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return cli.Usage(fmt.Errorf("keygen: %s exists; --force replaces it", path))
			}
			return fmt.Errorf("keygen: %w", err)
		}
		return nil
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	return nil
}
