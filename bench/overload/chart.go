package overload

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var armColors = map[string]color.RGBA{
	"chi":         {R: 0x88, G: 0x88, B: 0x88, A: 0xff},
	"go-zero":     {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"failsafe-go": {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"jfast":       {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// Chart draws goodput (as a share of the capacity) and admitted p99 against
// the offered load, one line per arm, side by side, into a PNG at path.
func Chart(r *Run, path string) error {
	good := plot.New()
	good.Title.Text = "Goodput (200s within 500 ms)"
	good.X.Label.Text = "offered load (× capacity)"
	good.Y.Label.Text = "% of capacity"
	good.Y.Min = 0
	tail := plot.New()
	tail.Title.Text = "Admitted p99 latency"
	tail.X.Label.Text = "offered load (× capacity)"
	tail.Y.Label.Text = "ms (log scale)"
	tail.Y.Scale = plot.LogScale{}
	tail.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	sums := r.Summaries()
	for _, arm := range Arms {
		var gp, lp plotter.XYs
		for _, s := range sums {
			if s.Arm != arm {
				continue
			}
			gp = append(gp, plotter.XY{X: s.Level, Y: 100 * s.Goodput / r.Capacity})
			if s.P99 > 0 {
				lp = append(lp, plotter.XY{X: s.Level, Y: max(ms(s.P99), 1)})
			}
		}
		for _, p := range []struct {
			plot *plot.Plot
			xys  plotter.XYs
		}{{good, gp}, {tail, lp}} {
			if len(p.xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(p.xys)
			if err != nil {
				return err
			}
			line.Color, points.Color = armColors[arm], armColors[arm]
			line.Width = vg.Points(2)
			points.Shape = draw.CircleGlyph{}
			p.plot.Add(line, points)
			p.plot.Legend.Add(arm, line, points)
		}
	}
	good.Legend.Top, good.Legend.Left = false, true
	good.Legend.Left = true
	tail.Legend.Top, tail.Legend.Left = true, true
	for _, p := range []*plot.Plot{good, tail} {
		p.Add(plotter.NewGrid())
	}

	const w, h = 12 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{{good, tail}}, tiles, dc)
	good.Draw(canvases[0][0])
	tail.Draw(canvases[0][1])
	return saveVG(img, path)
}
