package report

import (
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/forgive-emu/forgive/lab/results"
)

// Sizes of the figures. At 100 dots per inch a figure is 1,100 pixels
// wide, plus 200 for a side legend.
const (
	dpi           = 100
	figureWidth   = 11 * vg.Inch
	legendWidth   = 2 * vg.Inch
	headingHeight = 0.45 * vg.Inch
	panelHeight   = 2.2 * vg.Inch
	gridPad       = 0.15 * vg.Inch
)

// palette colours policies by their position in the file, so a policy
// keeps its colour in every plot. The first policy, the baseline, is black;
// the rest are Tableau 10, then cyan and olive.
var palette = []color.RGBA{
	{0x00, 0x00, 0x00, 0xff},
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0xe1, 0x57, 0x59, 0xff},
	{0x76, 0xb7, 0xb2, 0xff}, {0x59, 0xa1, 0x4f, 0xff}, {0xed, 0xc9, 0x48, 0xff},
	{0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff}, {0x9c, 0x75, 0x5f, 0xff},
	{0xba, 0xb0, 0xac, 0xff}, {0x17, 0xbe, 0xcf, 0xff}, {0x80, 0x80, 0x00, 0xff},
}

var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{},
	draw.CrossGlyph{}, draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{},
}

var (
	criticalShade = color.NRGBA{0xff, 0xa0, 0x40, 0x40} // light orange
	exemptShade   = color.NRGBA{0x40, 0xb0, 0x40, 0x40} // light green
	// The phases of a step (StepPhasesPNG).
	computeShade   = color.NRGBA{0x40, 0x80, 0xd0, 0x30} // light blue
	allReduceShade = color.NRGBA{0xff, 0xa0, 0x40, 0x30} // light orange
	markColor      = color.RGBA{0xf2, 0x8e, 0x2b, 0xff}
	limitColor     = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	dashes         = []vg.Length{vg.Points(5), vg.Points(3)}
)

// policySeries is one policy's line: index picks its colour and marker;
// run is the run a time series came from.
type policySeries struct {
	index  int
	policy string
	xys    plotter.XYs
	run    *results.Run
}

func seriesOf(s []policySeries) []plotter.XYs {
	out := make([]plotter.XYs, len(s))
	for i := range s {
		out[i] = s[i].xys
	}
	return out
}

func colorOf(index int) color.Color { return palette[index%len(palette)] }

// newPlot returns a plot with fonts scaled from the title's size, so
// small multiples stay legible.
func newPlot(title, xLabel, yLabel string, titleSize vg.Length) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = titleSize
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.X.Label.TextStyle.Font.Size = titleSize - 1
	p.Y.Label.TextStyle.Font.Size = titleSize - 1
	p.X.Tick.Label.Font.Size = titleSize - 2
	p.Y.Tick.Label.Font.Size = titleSize - 2
	p.Add(plotter.NewGrid())
	return p
}

func sideLegend() plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle.Font.Size = 10
	l.Padding = vg.Points(2)
	return l
}

func lineWithMarks(xys plotter.XYs, index int) (*plotter.Line, *plotter.Scatter) {
	line := plainLine(xys, index)
	marks := &plotter.Scatter{XYs: xys, GlyphStyle: draw.GlyphStyle{
		Color:  colorOf(index),
		Radius: vg.Points(3),
		Shape:  glyphs[index%len(glyphs)],
	}}
	return line, marks
}

// plainLine joins the points; stepLine holds each value until the next
// sample, which is how a sampled rate or a CDF reads.
func plainLine(xys plotter.XYs, index int) *plotter.Line {
	return &plotter.Line{XYs: xys, LineStyle: draw.LineStyle{Color: colorOf(index), Width: vg.Points(1.4)}}
}

func stepLine(xys plotter.XYs, index int) *plotter.Line {
	l := plainLine(xys, index)
	l.StepStyle = plotter.PostStep
	return l
}

// addSeries adds a sampled series, with a marker when it is a single
// sample, which a line alone would not show.
func addSeries(p *plot.Plot, line *plotter.Line, index int) {
	p.Add(line)
	if len(line.XYs) == 1 {
		_, marks := lineWithMarks(line.XYs, index)
		p.Add(marks)
	}
}

// threshold is a dashed horizontal line across xs.
func threshold(xs interval, y float64, c color.Color) *plotter.Line {
	return &plotter.Line{
		XYs:       plotter.XYs{{X: xs.lo, Y: y}, {X: xs.hi, Y: y}},
		LineStyle: draw.LineStyle{Color: c, Width: vg.Points(1), Dashes: dashes},
	}
}

// shading fills each span from bottom to top, without an outline.
func shading(spans []interval, bottom, top float64, c color.Color) *plotter.Polygon {
	rings := make([]plotter.XYs, len(spans))
	for i, s := range spans {
		rings[i] = plotter.XYs{{X: s.lo, Y: bottom}, {X: s.hi, Y: bottom}, {X: s.hi, Y: top}, {X: s.lo, Y: top}}
	}
	return &plotter.Polygon{XYs: rings, Color: c, LineStyle: draw.LineStyle{Color: color.Transparent, Width: 0}}
}

// headroom is the top of a y axis whose data reach hi.
func headroom(hi float64) float64 {
	if hi > 0 && finite(hi) {
		return hi * 1.08
	}
	return 1
}

// setTimeAxis sets an x axis to xs, widened when they are all equal. A
// distribution (logOK) goes on a log scale when its values span more than a
// factor of 20 (an all-reduce CDF with a long tail); a time series never
// does, since its samples start near zero.
func setTimeAxis(p *plot.Plot, xs interval, logOK bool) {
	if logOK && xs.lo > 0 && xs.hi/xs.lo > 20 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if xs.hi <= xs.lo {
		d := math.Abs(xs.lo) * 0.05
		if d == 0 {
			d = 1
		}
		xs = interval{xs.lo - d, xs.hi + d}
		p.X.Scale = plot.LinearScale{}
		p.X.Tick.Marker = plot.DefaultTicks{}
	}
	p.X.Min, p.X.Max = xs.lo, xs.hi
}

// integerTicks marks whole steps and labels about 20 of them. Over a wide
// range only the labelled values get a mark, so a file with absurd step
// numbers cannot make it loop for long.
func integerTicks(lo, hi float64) []plot.Tick {
	first, last := math.Ceil(lo), math.Floor(hi)
	if !(last >= first) || math.IsInf(last-first, 0) {
		return nil
	}
	every := max(1, math.Ceil((last-first+1)/20))
	stride := 1.0
	if every > 2 {
		stride = every
	}
	var ticks []plot.Tick
	for v := first; v <= last && len(ticks) < 100; v += stride {
		t := plot.Tick{Value: v}
		if math.Mod(v-first, every) == 0 {
			t.Label = strconv.FormatFloat(v, 'f', 0, 64)
		}
		ticks = append(ticks, t)
		if v+stride == v { // beyond float64's integers
			break
		}
	}
	return ticks
}

// withLegend is one plot with the legend in a column to its right, where
// it hides no data.
func withLegend(p *plot.Plot, legend plot.Legend, h vg.Length) figure {
	return figure{w: figureWidth + legendWidth, h: h, draw: func(c draw.Canvas) {
		body, side := splitLegend(c)
		p.Draw(draw.Crop(body, gridPad, 0, gridPad, -gridPad))
		legend.Draw(side)
	}}
}

func splitLegend(c draw.Canvas) (body, side draw.Canvas) {
	width := c.Max.X - c.Min.X
	body = draw.Crop(c, 0, -legendWidth, 0, 0)
	side = draw.Crop(c, width-legendWidth+gridPad, 0, 0, -gridPad)
	return body, side
}

// gridFigure lays out small multiples under a heading: one column for up
// to three panels, two up to eight, three beyond.
func gridFigure(heading string, plots []*plot.Plot) figure {
	cols := 3
	switch {
	case len(plots) <= 3:
		cols = 1
	case len(plots) <= 8:
		cols = 2
	}
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
		for c := range cols {
			if i := r*cols + c; i < len(plots) {
				grid[r][c] = plots[i]
			}
		}
	}
	return figure{w: figureWidth, h: headingHeight + vg.Length(rows)*panelHeight, draw: func(c draw.Canvas) {
		drawGrid(drawHeading(c, heading), grid)
	}}
}

func drawGrid(c draw.Canvas, grid [][]*plot.Plot) {
	tiles := draw.Tiles{
		Rows: len(grid), Cols: len(grid[0]),
		PadX: gridPad * 2, PadY: gridPad,
		PadTop: gridPad, PadBottom: gridPad, PadLeft: gridPad, PadRight: gridPad,
	}
	canvases := plot.Align(grid, tiles, c)
	for r, row := range grid {
		for col, p := range row {
			if p != nil {
				p.Draw(canvases[r][col])
			}
		}
	}
}

// drawHeading writes a centred line at the top of c and returns the rest.
func drawHeading(c draw.Canvas, heading string) draw.Canvas {
	sty := text.Style{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, 13),
		Handler: plot.DefaultTextHandler,
		XAlign:  draw.XCenter,
		YAlign:  draw.YTop,
	}
	c.FillText(sty, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: c.Max.Y - gridPad}, heading)
	return draw.Crop(c, 0, 0, 0, -headingHeight)
}
