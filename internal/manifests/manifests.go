// Package manifests reads the YAML or JSON documents of files, directories and stdin, for
// holdfast's offline commands (check, simulate): every document is named by where it was
// read, so that an error can say which one is wrong.
package manifests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Each calls fn with every non-empty document of the files and directories given ("-" is
// stdin; a directory's .yaml, .yml and .json files, in name order), in order, and its
// source: "<file>, document <n>". A document that does not parse, or an error of fn, stops
// the walk and is returned, named by its source.
func Each(paths []string, stdin io.Reader, fn func(source string, raw []byte) error) error {
	read := func(name string, r io.Reader) error {
		docs := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
		for i := 1; ; i++ {
			source := fmt.Sprintf("%s, document %d", name, i)
			var raw runtime.RawExtension
			if err := docs.Decode(&raw); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return fmt.Errorf("%s: %w", source, err)
			}
			if len(strings.TrimSpace(string(raw.Raw))) == 0 || string(raw.Raw) == "null" {
				continue
			}
			if err := fn(source, raw.Raw); err != nil {
				return err
			}
		}
	}
	for _, p := range paths {
		if p == "-" {
			if err := read("stdin", stdin); err != nil {
				return err
			}
			continue
		}
		files := []string{p}
		if info, err := os.Stat(p); err != nil {
			return err
		} else if info.IsDir() {
			files = nil
			entries, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if ext := filepath.Ext(e.Name()); !e.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, ext) {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		}
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			err = read(name, f)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}
