package config

import "perfevent/internal/conffile"

// ParseHeld reads and parses perfevent.conf as ParseFile does, through a
// file the agent holds from start-up: the agent opens its configuration as
// root and reloads it as $PCP_USER (conffile.File says how).
func ParseHeld(f *conffile.File) (*File, error) {
	src, err := f.Read()
	if err != nil {
		return nil, err
	}
	return Parse(f.Path(), src)
}
