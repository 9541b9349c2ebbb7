"""Framework shared by every benchmark: schema, systems, configs, LoadGen runner, backends, results."""
