package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// writeSynthetic writes a bundle of the whole log of n entries as the exporter lays it out
// (every field, then the entries) without a database: the entries are the ones writeBundle
// appends, with a fixed time, and their proofs are paths in the RFC 6962 tree built here from
// their leaf hashes, against a checkpoint and a selection signed with a fresh key. It streams
// the entries to the file, holding only the tree (64 bytes a leaf), so a 10M-entry bundle
// (about 19 GB) takes minutes, not a database of that size and an export held in memory.
func writeSynthetic(n int, bundlePath, keyPath string) error {
	var id [8]byte
	rand.Read(id[:])
	skey, vkey, err := note.GenerateKey(rand.Reader, "agora/"+hex.EncodeToString(id[:]))
	if err != nil {
		return err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return err
	}
	origin := verify.Origin(signer.Name(), "agora.db")
	entryText := func(i int) []byte {
		return []byte(`{"actor":"alice","details":{"digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},"kind":"catalog.register","seq":` +
			strconv.Itoa(i) + `,"subject":"capability/c` + strconv.Itoa(i) + `","time":"2026-11-28T02:50:42.711273296Z"}`)
	}
	// The tree: levels[0] the leaves, each level the one below paired up, a lone last node
	// carried up (RFC 6962's split of a tree whose size is not a power of two).
	leaves := make([][32]byte, n)
	for i := range n {
		leaves[i] = sha256.Sum256(append([]byte{0}, entryText(i)...))
	}
	levels := [][][32]byte{leaves}
	for level := leaves; len(level) > 1; {
		up := make([][32]byte, (len(level)+1)/2)
		var buf [65]byte
		buf[0] = 1
		for j := range up {
			if 2*j+1 == len(level) {
				up[j] = level[2*j]
				continue
			}
			copy(buf[1:], level[2*j][:])
			copy(buf[33:], level[2*j+1][:])
			up[j] = sha256.Sum256(buf[:])
		}
		levels = append(levels, up)
		level = up
	}
	root := levels[len(levels)-1][0]
	cp, err := verify.SignCheckpoint(verify.Checkpoint{Origin: origin, Size: uint64(n), Hash: root[:]}, signer)
	if err != nil {
		return err
	}
	idx := sha256.New()
	var ib [8]byte
	for i := range n {
		binary.BigEndian.PutUint64(ib[:], uint64(i))
		idx.Write(ib[:])
	}
	b := &verify.Bundle{Format: verify.Format, Origin: origin, Key: vkey,
		Selection:  verify.Selection{FromIndex: 0, EndIndex: uint64(n), Count: n},
		Checkpoint: cp, Manifests: []verify.Manifest{}, Entries: []verify.Entry{}}
	signed, err := note.Sign(&note.Note{Text: string(verify.SelectionTextOf(b, "sha256:"+hex.EncodeToString(idx.Sum(nil))))}, signer)
	if err != nil {
		return err
	}
	b.SelectionNote = signed
	var head bytes.Buffer
	enc := json.NewEncoder(&head)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return err
	}
	frame, ok := bytes.CutSuffix(head.Bytes(), []byte(" \"entries\": []\n}\n"))
	if !ok {
		return fmt.Errorf("the bundle's fields do not end with its entries")
	}
	f, err := os.Create(bundlePath)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(frame)
	w.WriteString(" \"entries\": [\n")
	b64 := base64.StdEncoding
	for i := range n {
		if i > 0 {
			w.WriteString(",\n")
		}
		w.WriteString("  {\n   \"index\": " + strconv.Itoa(i) + ",\n   \"entry\": \"" + b64.EncodeToString(entryText(i)) +
			"\",\n   \"leaf_hash\": \"" + b64.EncodeToString(leaves[i][:]) + "\",\n   \"inclusion_proof\": [")
		k, at := 0, i
		for _, level := range levels[:len(levels)-1] {
			if sib := at ^ 1; sib < len(level) {
				if k > 0 {
					w.WriteString(",")
				}
				w.WriteString("\n    \"" + b64.EncodeToString(level[sib][:]) + "\"")
				k++
			}
			at >>= 1
		}
		if k > 0 {
			w.WriteString("\n   ")
		}
		w.WriteString("]\n  }")
	}
	w.WriteString("\n ]\n}\n")
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(keyPath, []byte(vkey+"\n"), 0o644)
}
