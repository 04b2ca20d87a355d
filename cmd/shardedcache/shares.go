package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shardedcache/shardedcache/ring"
)

func sharesCmd() *cobra.Command {
	var svg string
	c := &cobra.Command{
		Use:   "shares LIST",
		Short: "Each shard's exact share of the key space, as a table and a bar chart",
		Long: `shares prints each shard's exact share of the key hash's range (ring.Shares,
computed over the whole range, not sampled) next to its share of the total
weight, with a bar per shard scaled to the largest share. --svg writes a
picture of the ring: each shard's arcs, in its colour.`,
		Args: exactArgs("LIST"),
		RunE: func(c *cobra.Command, args []string) error {
			return withFleet(args[0], func(f *fleet) error {
				shares, err := f.ring.Shares()
				if err != nil {
					return err
				}
				printShares(c.OutOrStdout(), f, shares)
				if svg == "" {
					return nil
				}
				return os.WriteFile(svg, []byte(ringSVG(f, shares)), 0o644)
			})
		},
	}
	c.Flags().StringVar(&svg, "svg", "", "write a picture of the ring's arcs to this SVG file")
	return c
}

// barWidth is the width, in characters, of the largest share's bar.
const barWidth = 40

func printShares(w io.Writer, f *fleet, shares []float64) {
	fmt.Fprintf(w, "placement: %v\n\n", f.ring.Preset())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tWEIGHT\tSHARE\tBY WEIGHT\t")
	total := 0
	for _, s := range f.shards {
		total += s.Weight
	}
	top := 0.0
	for _, s := range shares {
		top = max(top, s)
	}
	for i, s := range f.shards {
		fmt.Fprintf(tw, "%v\t%d\t%.4f%%\t%.4f%%\t%s\n", s, s.Weight, shares[i]*100,
			float64(s.Weight)/float64(total)*100, bar(shares[i]/top, barWidth))
	}
	_ = tw.Flush()
}

// bar draws fraction (0..1) of width characters with eighth blocks.
func bar(fraction float64, width int) string {
	eighths := int(math.Round(fraction * float64(width*8)))
	partial := []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}
	return strings.Repeat("█", eighths/8) + partial[eighths%8]
}

// svgSegments is the number of equal segments of the hash range drawn:
// each takes the colour of the owner of its first point.
const svgSegments = 4096

var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// ringSVG draws the ring as a circle of arcs, one per run of segments
// with one owner, starting at the top and going clockwise with the hash,
// and a legend with each shard's share.
func ringSVG(f *fleet, shares []float64) string {
	const cx, cy, r, width = 200.0, 200.0, 160.0, 40.0
	var b strings.Builder
	height := max(400, 60+20*len(f.shards))
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="760" height="%d" font-family="sans-serif" font-size="13">`+"\n", height)
	fmt.Fprintf(&b, "<title>%s</title>\n", escape(f.ring.Preset().String()))
	owner := func(seg int) int { return f.ring.LocatePoint(segmentPoint(f.ring.Hash(), seg)) }
	for start := 0; start < svgSegments; {
		end, o := start+1, owner(start)
		for end < svgSegments && owner(end) == o {
			end++
		}
		a0, a1 := 2*math.Pi*float64(start)/svgSegments, 2*math.Pi*float64(end)/svgSegments
		large := 0
		if a1-a0 > math.Pi {
			large = 1
		}
		x0, y0 := cx+r*math.Sin(a0), cy-r*math.Cos(a0)
		x1, y1 := cx+r*math.Sin(a1), cy-r*math.Cos(a1)
		if end-start == svgSegments { // one owner: a whole circle
			fmt.Fprintf(&b, `<circle cx="%g" cy="%g" r="%g" fill="none" stroke="%s" stroke-width="%g"/>`+"\n", cx, cy, r, palette[o%len(palette)], width)
		} else {
			fmt.Fprintf(&b, `<path d="M %.2f %.2f A %g %g 0 %d 1 %.2f %.2f" fill="none" stroke="%s" stroke-width="%g"/>`+"\n",
				x0, y0, r, r, large, x1, y1, palette[o%len(palette)], width)
		}
		start = end
	}
	for i, s := range f.shards {
		y := 40 + 20*i
		fmt.Fprintf(&b, `<rect x="420" y="%d" width="14" height="14" fill="%s"/><text x="442" y="%d">%s: %.4f%%</text>`+"\n",
			y-12, palette[i%len(palette)], y, escape(s.String()), shares[i]*100)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// segmentPoint is the first point of segment seg of svgSegments over the
// hash's range [0, 2^Bits).
func segmentPoint(h ring.Hash, seg int) uint64 {
	bits := h.Bits()
	if bits <= 12 {
		return uint64(seg) >> (12 - bits)
	}
	return uint64(seg) << (bits - 12) // svgSegments = 2^12
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
