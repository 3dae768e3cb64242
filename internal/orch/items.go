package orch

import (
	"errors"

	"github.com/agora-dev/agora/internal/orch/fanoutitems"
)

// MaxItemsBytes caps a fan-out list file ([fanoutitems.MaxBytes]).
const MaxItemsBytes = fanoutitems.MaxBytes

// Item is one element of a fan-out list: the task it becomes is the fan-out's ID[Key].
type Item = fanoutitems.Item

// DecodeItems reads a fan-out list exactly ([fanoutitems.Decode]): anything but one JSON list
// of at most plan.MaxFanOutItems items with distinct valid keys is refused whole.
func DecodeItems(b []byte) ([]Item, error) { return fanoutitems.Decode(b) }

// errNoList is the reason a fan-out fails when its producer left no list file.
var errNoList = errors.New("the producer left no such output")
