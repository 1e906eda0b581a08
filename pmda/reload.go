package main

import "perfevent/internal/config"

// parseConfig reads the configuration: through the descriptor start-up
// opened when there is one, so that a reload as the agent's user can read
// a file only root may open (see config.Held).
func (o *options) parseConfig() (*config.File, error) {
	if o.held != nil {
		return o.held.Parse()
	}
	return config.ParseFile(o.config)
}
