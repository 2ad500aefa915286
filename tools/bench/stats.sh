# stats.sh: the benchmark drivers' figures (run.sh, peers.sh source it).
# Each program prints one JSON object per line; these read a file of them.

# field FILE KEY: the values of KEY in FILE's one-line JSON objects, one a line
field() {
	sed -n "s/.*\"$2\":\([0-9.eE+-]*\).*/\1/p" "$1"
}

# median FILE KEY
median() {
	field "$1" "$2" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
