// Command plot turns the runs of bench/compare.sh (results.tsv) into the
// side-by-side summary (medians per load and server, the lakegate ÷ Pulsar
// ratio table) and a PNG of latency percentiles. Used only by
// bench/compare.sh; not part of the lakegate binary.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"log"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

type run map[string]string

func main() {
	results := flag.String("results", "", "results.tsv of bench/compare.sh")
	summary := flag.String("summary", "", "Markdown summary to write")
	pngPath := flag.String("png", "", "latency plot to write")
	command := flag.String("command", "make bench-compare", "the command that produced the results")
	flag.Parse()
	runs, err := read(*results)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*summary, []byte(markdown(runs, *command)), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := plot(runs, *pngPath); err != nil {
		log.Fatal(err)
	}
}

func read(path string) ([]run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var cols []string
	var out []run
	for sc.Scan() {
		fs := strings.Split(sc.Text(), "\t")
		if cols == nil {
			cols = fs
			continue
		}
		r := run{}
		for i, c := range cols {
			if i < len(fs) {
				r[c] = fs[i]
			}
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// median of the numeric values of col over runs of load on target (NaN: none).
func median(runs []run, load, target, col string) (float64, int) {
	var vs []float64
	for _, r := range runs {
		if r["load"] != load || r["target"] != target {
			continue
		}
		if v, err := strconv.ParseFloat(r[col], 64); err == nil {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return math.NaN(), 0
	}
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2], n
	}
	return (vs[n/2-1] + vs[n/2]) / 2, n
}

func targets(runs []run) []string {
	var ts []string
	for _, want := range []string{"lakegate", "pulsar", "pulsar-nofsync"} {
		for _, r := range runs {
			if r["target"] == want {
				ts = append(ts, want)
				break
			}
		}
	}
	return ts
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 10000:
		return fmt.Sprintf("%.1f k", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

type metric struct {
	label, load, col string
	higherBetter     bool
}

var metrics = []metric{
	{"max-rate produce, 1 partition: msg/s", "max1", "msgps", true},
	{"max-rate produce, 8 partitions: msg/s", "max8", "msgps", true},
	{"max-rate produce, 100 partitions: msg/s", "max100", "msgps", true},
	{"max-rate produce, 1000 partitions: msg/s", "max1000", "msgps", true},
	{"max-rate produce, 1 partition, Go perf tool: msg/s", "gomax1", "msgps", true},
	{"fixed 20 k msg/s: publish p50 ms", "fixed20k", "p50", false},
	{"fixed 20 k msg/s: publish p99 ms", "fixed20k", "p99", false},
	{"fixed 20 k msg/s: publish p99.9 ms", "fixed20k", "p999", false},
	{"fixed 20 k msg/s: server CPU, % of a core", "fixed20k", "cpu_pct", false},
	{"max-rate produce, 1 partition: client (pulsar-perf) CPU, % of a core", "max1", "client_cpu_pct", false},
	{"produce + consume 10 k msg/s: publish p99 ms", "e2e10k", "p99", false},
	{"produce + consume 10 k msg/s: end-to-end p50 ms", "e2e10k", "e2e_p50", false},
	{"produce + consume 10 k msg/s: end-to-end p99 ms", "e2e10k", "e2e_p99", false},
	{"produce + consume 10 k msg/s, Go client: end-to-end p50 ms", "goe2e10k", "e2e_p50", false},
	{"produce + consume 10 k msg/s, Go client: end-to-end p99 ms", "goe2e10k", "e2e_p99", false},
	{"produce + consume 10 k msg/s, Go client: end-to-end p99.9 ms", "goe2e10k", "e2e_p999", false},
	{"catch-up read of a 1 M backlog: msg/s", "drain", "drain_msgps", true},
	{"catch-up read of a 1 M backlog: client (pulsar-perf) CPU, % of a core", "drain", "client_cpu_pct", false},
	{"catch-up read of a 1 M backlog, Go client: msg/s", "godrain", "drain_msgps", true},
	{"catch-up read of a 1 M backlog, Go client: client CPU, % of a core", "godrain", "client_cpu_pct", false},
	{"catch-up read of a 1 M backlog, two Go clients: msg/s", "godrain2", "drain_msgps", true},
	{"catch-up read of a 1 M backlog, two Go clients: client CPU, % of a core", "godrain2", "client_cpu_pct", false},
	{"catch-up read of a 1 M backlog on 2 partitions, a Go client each: msg/s", "godrainp2", "drain_msgps", true},
	{"catch-up read of a 1 M backlog on 2 partitions, a Go client each: client CPU, % of a core", "godrainp2", "client_cpu_pct", false},
	{"in transactions of 50, 1 partition: msg/s", "txn1", "msgps", true},
	{"in transactions of 50, 8 partitions: msg/s", "txn8", "msgps", true},
	{"in transactions of 50, 1 partition: publish p99 ms", "txn1", "p99", false},
	{"in transactions of 50, 1 partition: server CPU, % of a core", "txn1", "cpu_pct", false},
	{"in transactions of 50, 8 partitions: server CPU, % of a core", "txn8", "cpu_pct", false},
	{"server peak RSS at max rate, 1 partition: MiB", "max1", "rss_mib", false},
	{"server peak RSS in transactions, 8 partitions: MiB", "txn8", "rss_mib", false},
	{"server peak RSS at max rate, 100 partitions: MiB", "max100", "rss_mib", false},
	{"server peak RSS at max rate, 1000 partitions: MiB", "max1000", "rss_mib", false},
}

func markdown(runs []run, command string) string {
	ts := targets(runs)
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s` — medians over the runs of each (load, server); every run on a fresh server.\n\n", strings.TrimSpace(command))
	b.WriteString("| load (median) |")
	for _, t := range ts {
		fmt.Fprintf(&b, " %s |", t)
	}
	b.WriteString(" lakegate ÷ pulsar |\n|---|")
	for range ts {
		b.WriteString("---:|")
	}
	b.WriteString("---:|\n")
	for _, m := range metrics {
		lg, n := median(runs, m.load, "lakegate", m.col)
		pu, _ := median(runs, m.load, "pulsar", m.col)
		if n == 0 && math.IsNaN(pu) {
			continue
		}
		fmt.Fprintf(&b, "| %s |", m.label)
		for _, t := range ts {
			v, _ := median(runs, m.load, t, m.col)
			fmt.Fprintf(&b, " %s |", num(v))
		}
		ratio := "–"
		if !math.IsNaN(lg) && !math.IsNaN(pu) && pu > 0 && lg > 0 {
			r := lg / pu
			switch {
			case m.higherBetter:
				ratio = fmt.Sprintf("%.2f×", r)
			case r <= 1:
				ratio = fmt.Sprintf("%.2f× (%.1f× less)", r, 1/r)
			default:
				ratio = fmt.Sprintf("%.2f× (more)", r)
			}
		}
		fmt.Fprintf(&b, " %s |\n", ratio)
	}
	b.WriteString("\nEvery run (throughput msg/s; publish and end-to-end latency ms; server and client CPU % of one core over the run; server peak RSS MiB):\n\n")
	b.WriteString("| load | server | rep | msg/s | p50 | p95 | p99 | p99.9 | max | e2e p50 | e2e p99 | e2e p99.9 | drain msg/s | CPU % | RSS MiB | client CPU % |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r["load"], r["target"], r["rep"], r["msgps"], r["p50"], r["p95"], r["p99"], r["p999"], r["max"],
			r["e2e_p50"], r["e2e_p99"], r["e2e_p999"], r["drain_msgps"], r["cpu_pct"], r["rss_mib"], r["client_cpu_pct"])
	}
	return b.String()
}

// --- the plot ---------------------------------------------------------------------

var colors = map[string]color.RGBA{
	"lakegate":       {0x1f, 0x77, 0xb4, 0xff},
	"pulsar":         {0xd6, 0x27, 0x28, 0xff},
	"pulsar-nofsync": {0xff, 0x7f, 0x0e, 0xff},
}

type panel struct {
	title, load string
	cols        []string
	labels      []string
}

func plot(runs []run, path string) error {
	panels := []panel{
		{"publish latency, fixed 20 k msg/s, 1 partition", "fixed20k", []string{"p50", "p95", "p99", "p999", "max"}, []string{"p50", "p95", "p99", "p99.9", "max"}},
		{"end-to-end latency, produce + consume 10 k msg/s", "e2e10k", []string{"e2e_p50", "e2e_p99", "e2e_p999", "e2e_max"}, []string{"p50", "p99", "p99.9", "max"}},
		{"end-to-end latency, 10 k msg/s, Go client", "goe2e10k", []string{"e2e_p50", "e2e_p99", "e2e_p999", "e2e_max"}, []string{"p50", "p99", "p99.9", "max"}},
	}
	// Only the loads that ran get a panel (all of them, empty, if none ran).
	ran := slices.DeleteFunc(slices.Clone(panels), func(p panel) bool {
		return !slices.ContainsFunc(runs, func(r run) bool { return r["load"] == p.load })
	})
	if len(ran) > 0 {
		panels = ran
	}
	const pw, ph = 480, 360
	img := image.NewRGBA(image.Rect(0, 0, pw*len(panels), ph+40))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	ts := targets(runs)
	for i, p := range panels {
		drawPanel(img, image.Rect(i*pw, 0, (i+1)*pw, ph), runs, ts, p)
	}
	// Legend.
	x := 20
	for _, t := range ts {
		c := colors[t]
		fill(img, image.Rect(x, ph+16, x+24, ph+20), c)
		text(img, x+30, ph+24, t+" (median)", color.Black)
		x += 200
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return png.Encode(f, img)
}

func drawPanel(img *image.RGBA, r image.Rectangle, runs []run, ts []string, p panel) {
	left, right, top, bottom := r.Min.X+60, r.Max.X-20, r.Min.Y+40, r.Max.Y-40
	text(img, r.Min.X+60, r.Min.Y+20, p.title, color.Black)
	lo, hi := math.Inf(1), math.Inf(-1)
	vals := map[string][]float64{}
	for _, t := range ts {
		for _, c := range p.cols {
			v, _ := median(runs, p.load, t, c)
			vals[t] = append(vals[t], v)
			if !math.IsNaN(v) && v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		text(img, left, (top+bottom)/2, "no data", color.Black)
		return
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	y := func(v float64) int {
		return bottom - int(float64(bottom-top)*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
	}
	grey := color.RGBA{0xcc, 0xcc, 0xcc, 0xff}
	for d := lo; d <= hi*1.0001; d *= 10 {
		yy := y(d)
		fill(img, image.Rect(left, yy, right, yy+1), grey)
		text(img, r.Min.X+4, yy+4, strconv.FormatFloat(d, 'g', -1, 64)+" ms", color.Black)
	}
	fill(img, image.Rect(left, top, left+1, bottom), color.Black)
	fill(img, image.Rect(left, bottom, right, bottom+1), color.Black)
	n := len(p.cols)
	x := func(i int) int { return left + 30 + i*(right-left-60)/max(1, n-1) }
	for i, l := range p.labels {
		text(img, x(i)-len(l)*3, bottom+18, l, color.Black)
	}
	for _, t := range ts {
		c := colors[t]
		prev := image.Point{-1, -1}
		for i, v := range vals[t] {
			if math.IsNaN(v) || v <= 0 {
				prev = image.Point{-1, -1}
				continue
			}
			pt := image.Point{x(i), y(v)}
			fill(img, image.Rect(pt.X-3, pt.Y-3, pt.X+4, pt.Y+4), c)
			if prev.X >= 0 {
				line(img, prev, pt, c)
			}
			prev = pt
		}
	}
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

func line(img *image.RGBA, a, b image.Point, c color.RGBA) {
	steps := max(abs(b.X-a.X), abs(b.Y-a.Y))
	for s := 0; s <= steps; s++ {
		xx := a.X + (b.X-a.X)*s/max(1, steps)
		yy := a.Y + (b.Y-a.Y)*s/max(1, steps)
		img.Set(xx, yy, c)
		img.Set(xx, yy+1, c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
