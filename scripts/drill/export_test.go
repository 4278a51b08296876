package drill

// PlantedTables exposes, to the external tests, the tables a planted
// order's rows are removed from in service's database.
func PlantedTables(service string) []string {
	var names []string
	for _, t := range plantedTables(service) {
		names = append(names, t.name)
	}
	return names
}
