#ifndef SHAPES_H
#define SHAPES_H
double rect_area(double w, double h);
double circle_area(double r);
#endif
